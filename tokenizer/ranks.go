package tokenizer

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash/maphash"
	"io"
)

// MaxTokenLen is the longest token a rank file may hold (§10.1).
const MaxTokenLen = 65535

// Ranks is a validated byte-pair vocabulary: token bytes for ranks 0..N−1,
// every single byte among them. It is immutable and safe for concurrent use.
type Ranks struct {
	arena  []byte   // token bytes, in the order they were supplied
	start  []uint32 // rank -> offset in arena
	length []uint16 // rank -> token length
	table  []slot   // open addressing over all tokens except 2-byte ones
	pair2  []uint32 // rank of each 2-byte token, indexed by its bytes; noRank if none
	filter []uint64 // one bit per hash (high bits): most failed lookups stop here, in cache
	fshift uint     // 64 − log2 of the filter's bits
	mask   uint64
	maxLen int
	byte1  [256]uint32 // rank of each single-byte token
	digest [sha256.Size]byte
	// seeded switches the table from the fixed hash to maphash under seed,
	// once a probe chain grew past maxProbe (see hash).
	seeded bool
	seed   maphash.Seed
}

// Len returns N, the number of ranked tokens.
func (r *Ranks) Len() int { return len(r.start) }

// MaxLen returns the length in bytes of the longest token.
func (r *Ranks) MaxLen() int { return r.maxLen }

// Digest returns the SHA-256 of the rank file the ranks were parsed from
// (of the canonical file text for ranks built with NewRanks).
func (r *Ranks) Digest() [sha256.Size]byte { return r.digest }

// Token returns the bytes of rank i (a view; callers must not modify it), or
// false if i is out of range.
func (r *Ranks) Token(i int) ([]byte, bool) {
	if i < 0 || i >= len(r.start) {
		return nil, false
	}
	s := r.start[i]
	return r.arena[s : s+uint32(r.length[i]) : s+uint32(r.length[i])], true
}

// Rank returns the rank of the token b, or false if b is not a token.
func (r *Ranks) Rank(b []byte) (int, bool) {
	v, ok := r.lookup(string(b))
	return int(v), ok
}

// slot is one open-addressing entry. key holds the first (up to) eight
// token bytes, little-endian, so most probes compare in registers without
// touching the arena; meta is len<<32 | rank+1, and 0 marks an empty slot.
type slot struct {
	key  uint64
	meta uint64
}

// pack8 returns the first min(8, len(s)) bytes of s as a little-endian word.
func pack8(s string) uint64 {
	if len(s) >= 8 {
		return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	}
	// Two overlapping loads cover 2..7 bytes without a loop; the bytes
	// they share land in the same place in both.
	switch n := len(s); {
	case n >= 4:
		lo := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
		hi := uint64(s[n-4]) | uint64(s[n-3])<<8 | uint64(s[n-2])<<16 | uint64(s[n-1])<<24
		return lo | hi<<(8*(n-4))
	case n >= 2:
		lo := uint64(s[0]) | uint64(s[1])<<8
		hi := uint64(s[n-2]) | uint64(s[n-1])<<8
		return lo | hi<<(8*(n-2))
	case n == 1:
		return uint64(s[0])
	}
	return 0
}

// lookup finds the rank of token s.
func (r *Ranks) lookup(s string) (uint32, bool) {
	if len(s) == 2 {
		if r.pair2 == nil {
			return 0, false
		}
		v := r.pair2[uint16(s[0])|uint16(s[1])<<8]
		return v, v != noRank
	}
	if len(s) > r.maxLen || len(s) == 0 {
		return 0, false
	}
	k := pack8(s)
	return r.probe(s, k, r.hash(s, k))
}

// probe is lookup for a string of 3..maxLen bytes with k = pack8(s) and
// h = r.hash(s, k).
func (r *Ranks) probe(s string, k, h uint64) (uint32, bool) {
	if f := h >> r.fshift; r.filter[f>>6]&(1<<(f&63)) == 0 {
		return 0, false
	}
	want := uint64(len(s)) << 32
	for p := h & r.mask; ; p = (p + 1) & r.mask {
		e := &r.table[p]
		if e.meta == 0 {
			return 0, false
		}
		if e.key == k && e.meta&^0xffffffff == want {
			rank := uint32(e.meta) - 1
			if len(s) <= 8 {
				return rank, true
			}
			st := r.start[rank]
			if string(r.arena[st+8:st+uint32(len(s))]) == s[8:] {
				return rank, true
			}
		}
	}
}

// insert adds rank (whose bytes are already in the arena) and returns the
// rank already holding the same bytes, if any.
func (r *Ranks) insert(rank uint32) (uint32, bool) {
	tok := string(r.arena[r.start[rank] : r.start[rank]+uint32(r.length[rank])])
	if len(tok) > r.maxLen {
		r.maxLen = len(tok)
	}
	if len(tok) == 2 {
		if r.pair2 == nil {
			// Allocated on the first 2-byte token: a small file (a test, a
			// fuzz input, a byte-level vocabulary) need not pay for 256 KiB.
			r.pair2 = make([]uint32, 1<<16)
			for i := range r.pair2 {
				r.pair2[i] = noRank
			}
		}
		i := uint16(tok[0]) | uint16(tok[1])<<8
		if old := r.pair2[i]; old != noRank {
			return old, true
		}
		r.pair2[i] = rank
		return 0, false
	}
	// One probe sequence both detects a duplicate and finds the free slot.
	k := pack8(tok)
	want := uint64(len(tok)) << 32
	h := r.hash(tok, k)
	p := h & r.mask
	for probes := 0; r.table[p].meta != 0; p = (p + 1) & r.mask {
		e := r.table[p]
		if e.key == k && e.meta&^0xffffffff == want {
			old := uint32(e.meta) - 1
			st := r.start[old]
			if len(tok) <= 8 || string(r.arena[st+8:st+uint32(len(tok))]) == tok[8:] {
				return old, true
			}
		}
		if probes++; probes > maxProbe && !r.seeded {
			r.reseed()
			return r.insert(rank)
		}
	}
	f := h >> r.fshift
	r.filter[f>>6] |= 1 << (f & 63)
	r.table[p] = slot{k, want | uint64(rank+1)}
	return 0, false
}

// maxFilterBits caps the lookup filter: 2^22 bits (512 KiB) keep false
// positives near 5% for a 200k vocabulary while staying cache-resident.
// Smaller vocabularies get 16 bits per entry (at least 2^9), the same
// density or sparser, so a small file does not pay for 512 KiB.
const maxFilterBits = 22

func (r *Ranks) initTable(n int) {
	size := 1
	for size < 2*n {
		size <<= 1
	}
	r.table = make([]slot, size)
	r.mask = uint64(size - 1)
	bits := uint(9)
	for bits < maxFilterBits && 1<<bits < 16*n {
		bits++
	}
	r.filter = make([]uint64, 1<<bits/64)
	r.fshift = 64 - bits
}

// maxProbe bounds the probe chains of the fixed hash. Real vocabularies
// stay far below it (their longest run of occupied slots is a few dozen);
// a rank file crafted against the public fixed function exceeds it, and the
// table is rebuilt once with maphash under a fresh random seed, so loading
// stays linear (at most maxProbe probes per insert before the switch) and
// lookups stay short. The fixed hash is kept for every other file because
// it is about 40% faster per lookup than maphash in the encoder's hot loop.
const maxProbe = 256

// hash hashes s, whose first eight bytes are k.
func (r *Ranks) hash(s string, k uint64) uint64 {
	if r.seeded {
		return maphash.String(r.seed, s)
	}
	return hashString(s, k)
}

// reseed rebuilds the table and filter with the seeded hash.
func (r *Ranks) reseed() {
	old := r.table
	r.seeded, r.seed = true, maphash.MakeSeed()
	r.table = make([]slot, len(old))
	clear(r.filter)
	for _, e := range old {
		if e.meta != 0 {
			r.insert(uint32(e.meta) - 1)
		}
	}
}

// longestRun returns the longest run of occupied slots, which bounds every
// lookup's probes (a failed lookup walks to the end of its run). Inserts
// with short probes can still build one long run from consecutive home
// slots, so ParseRanks checks this too.
func (r *Ranks) longestRun() int {
	best, run := 0, 0
	// The table is at most half full, so two passes cover a run that wraps.
	for i := range 2 * len(r.table) {
		if r.table[i&int(r.mask)].meta != 0 {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return min(best, len(r.table))
}

// hashString is the fixed hash of s, whose first eight bytes are k.
func hashString(s string, k uint64) uint64 {
	h := mix64(k ^ uint64(len(s))*0x9E3779B97F4A7C15)
	for s = s[min(8, len(s)):]; len(s) > 0; s = s[min(8, len(s)):] {
		h = mix64(h ^ pack8(s))
	}
	return h
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// MaxRankFileSize bounds a rank file (the released Kimi and o200k files
// are under 4 MB): every byte of it becomes table and arena memory.
const MaxRankFileSize = 64 << 20

// LoadRanks reads and parses a tiktoken rank file. A path that is not a
// regular file is refused (regular.ErrNotRegular), as is a file larger than
// MaxRankFileSize (ErrTooLarge).
func LoadRanks(path string) (*Ranks, error) {
	data, err := readLimited(path, MaxRankFileSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading rank file: %w", err)
	}
	r, err := ParseRanks(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ReadRanks parses a tiktoken rank file from rd, reading at most
// MaxRankFileSize+1 bytes.
func ReadRanks(rd io.Reader) (*Ranks, error) {
	data, err := io.ReadAll(io.LimitReader(rd, MaxRankFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading rank file: %w", err)
	}
	return ParseRanks(data)
}

// ParseRanks parses the tiktoken rank format (§10.1): one
// "base64(token) rank" per line, exactly one space, LF or CRLF line ends,
// empty lines skipped, canonical padded base64, tokens of 1..65,535 bytes,
// ranks dense from 0 with every rank and token exactly once, and all 256
// single-byte tokens present. Every refusal is a *RankFileError naming the
// line; a file above MaxRankFileSize is refused with ErrTooLarge.
func ParseRanks(data []byte) (*Ranks, error) {
	if len(data) > MaxRankFileSize {
		return nil, fmt.Errorf("%w: rank file of %d bytes or more, limit %d", ErrTooLarge, len(data), MaxRankFileSize)
	}
	maxEntries := bytes.Count(data, []byte{'\n'}) + 1
	r := &Ranks{}
	r.digest = sha256.Sum256(data)
	// Decoded tokens are never longer than 3/4 of the base64 text.
	r.arena = make([]byte, 0, len(data)*3/4+4)
	start := make([]uint32, maxEntries)
	length := make([]uint16, maxEntries)
	lineOf := make([]uint32, maxEntries) // rank -> 1-based line; 0 = unseen
	r.start, r.length = start, length
	r.initTable(maxEntries)
	n := 0
	line := 0
	for pos := 0; pos < len(data); {
		line++
		end := bytes.IndexByte(data[pos:], '\n')
		var ln []byte
		if end < 0 {
			ln, pos = data[pos:], len(data)
		} else {
			ln, pos = data[pos:pos+end], pos+end+1
		}
		if len(ln) > 0 && ln[len(ln)-1] == '\r' {
			ln = ln[:len(ln)-1]
		}
		if len(ln) == 0 {
			continue
		}
		sp := bytes.IndexByte(ln, ' ')
		if sp < 0 {
			return nil, &RankFileError{line, "no space between token and rank"}
		}
		b64, dec := ln[:sp], ln[sp+1:]
		rank, ok := parseDecimal(dec)
		if !ok {
			return nil, &RankFileError{line, fmt.Sprintf("rank %.40q is not a canonical decimal number", dec)}
		}
		if rank >= maxEntries {
			return nil, &RankFileError{line, fmt.Sprintf("rank %d is larger than the file's %d lines allow (ranks must be dense from 0)", rank, maxEntries)}
		}
		if lineOf[rank] != 0 {
			return nil, &RankFileError{line, fmt.Sprintf("rank %d already given on line %d", rank, lineOf[rank])}
		}
		off := len(r.arena)
		var err string
		r.arena, err = appendBase64(r.arena, b64)
		if err != "" {
			return nil, &RankFileError{line, err}
		}
		tl := len(r.arena) - off
		if tl == 0 || tl > MaxTokenLen {
			return nil, &RankFileError{line, fmt.Sprintf("token length %d outside 1..%d", tl, MaxTokenLen)}
		}
		start[rank], length[rank], lineOf[rank] = uint32(off), uint16(tl), uint32(line)
		if old, dup := r.insert(uint32(rank)); dup {
			return nil, &RankFileError{line, fmt.Sprintf("token %q already has rank %d (line %d)", r.arena[off:], old, lineOf[old])}
		}
		n++
	}
	// n distinct ranks are dense exactly when all are below n.
	for rank := n; rank < maxEntries; rank++ {
		if lineOf[rank] != 0 {
			return nil, &RankFileError{int(lineOf[rank]), fmt.Sprintf("rank %d leaves a gap: the file has %d tokens, so ranks must be 0..%d", rank, n, n-1)}
		}
	}
	r.start, r.length = start[:n:n], length[:n:n]
	if !r.seeded && r.longestRun() > maxProbe {
		r.reseed()
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	return r, nil
}

// finish checks the single-byte tokens and fills the byte table.
func (r *Ranks) finish() error {
	for b := 0; b < 256; b++ {
		v, ok := r.lookup(string([]byte{byte(b)}))
		if !ok {
			return &RankFileError{0, fmt.Sprintf("single-byte token 0x%02x is missing", b)}
		}
		r.byte1[b] = v
	}
	return nil
}

// NewRanks builds ranks from tokens in rank order (tokens[i] has rank i),
// under the same rules as ParseRanks; errors name the rank as the line
// (rank i is line i+1 of the equivalent file). Digest is the SHA-256 of that
// equivalent file text (LF line ends).
func NewRanks(tokens [][]byte) (*Ranks, error) {
	var buf bytes.Buffer
	for i, t := range tokens {
		buf.Grow(len(t)*4/3 + 16)
		buf.WriteString(encodeBase64(t))
		fmt.Fprintf(&buf, " %d\n", i)
	}
	return ParseRanks(buf.Bytes())
}

// parseDecimal parses a canonical non-negative decimal (no sign, no leading
// zeros) that fits comfortably in an int.
func parseDecimal(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}
