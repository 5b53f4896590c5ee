package tokenizer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// The rank loader's former hash: a fixed splitmix64 finalizer over the
// first eight bytes and the length. It is a bijection on 8-byte tokens, so
// anyone can invert it and choose tokens whose hashes share their low bits:
// every insert then walks the same probe chain and loading is quadratic.
func fixedHash8(k uint64) uint64 { return mix64(k ^ lenMix8) }

// lenMix8 is 8·0x9E3779B97F4A7C15 mod 2^64, the former length term.
var lenMix8 = func() uint64 { g := uint64(0x9E3779B97F4A7C15); return 8 * g }()

// inverse returns the multiplicative inverse of odd a modulo 2^64 (Newton).
func inverse(a uint64) uint64 {
	x := a
	for range 6 {
		x *= 2 - a*x
	}
	return x
}

func unsplitmix(x uint64) uint64 {
	x ^= x>>31 ^ x>>62
	x *= inverse(0x94d049bb133111eb)
	x ^= x>>27 ^ x>>54
	x *= inverse(0xbf58476d1ce4e5b9)
	x ^= x>>30 ^ x>>60
	return x
}

// collisionFile returns a valid rank file: the 256 single bytes, then n
// 8-byte tokens whose fixed hashes all end in the same 32 bits (chain) or
// whose home slots are consecutive (run: every insert probes once, yet the
// table holds one run of n occupied slots that failed lookups walk).
func collisionFile(t testing.TB, n int, chain bool) []byte {
	f := newRankFile()
	var tok [8]byte
	for j := range n {
		h := uint64(j+1)<<32 | 0x5a5a5a5a
		if !chain {
			h = uint64(j+1)<<40 | uint64(j)
		}
		k := unsplitmix(h) ^ lenMix8
		if got := fixedHash8(k); got != h {
			t.Fatalf("crafted token %#x hashes to %#x, want %#x", k, got, h)
		}
		binary.LittleEndian.PutUint64(tok[:], k)
		f.add(tok[:])
	}
	return f.buf.Bytes()
}

// slower bounds how many times as long crafted tokens may take as ordinary
// ones: far below what a quadratic load or a long probe run costs at 100k
// tokens, far above the noise of a shared machine.
const slower = 8

// fastest returns the shortest of three runs of f.
func fastest(f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		f()
		best = min(best, time.Since(start))
	}
	return best
}

// plainFile returns a valid rank file of the 256 single bytes and n 8-byte
// tokens from a fixed pseudo-random sequence, as a baseline for collisionFile.
func plainFile(n int) []byte {
	f := newRankFile()
	var tok [8]byte
	x := uint64(0x9E3779B97F4A7C15)
	for range n {
		x += 0x9E3779B97F4A7C15
		binary.LittleEndian.PutUint64(tok[:], mix64(x))
		f.add(tok[:])
	}
	return f.buf.Bytes()
}

// rankFile writes a rank file: the 256 single bytes, then the tokens added,
// at ranks counting on from 256.
type rankFile struct {
	buf  bytes.Buffer
	rank int
}

func newRankFile() *rankFile {
	f := &rankFile{}
	for b := range 256 {
		f.add([]byte{byte(b)})
	}
	return f
}

func (f *rankFile) add(tok []byte) {
	f.buf.WriteString(encodeBase64(tok))
	f.buf.WriteByte(' ')
	f.buf.WriteString(itoa(f.rank))
	f.buf.WriteByte('\n')
	f.rank++
}

func itoa(v int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// Acceptance: 100k colliding tokens load, and their failed lookups run, within
// slower times what ordinary tokens take in the same run (the fixed hash took
// 7.2 s to load them, about 240 times as long), and every one of them is
// found again.
func TestRankLoadCollisions(t *testing.T) {
	const n = 100_000
	for _, chain := range []bool{true, false} {
		data := collisionFile(t, n, chain)
		var r *Ranks
		elapsed := fastest(func() {
			var err error
			if r, err = ParseRanks(data); err != nil {
				t.Fatal(err)
			}
		})
		// The bound is a ratio to ordinary tokens loaded in the same run, not a wall-clock
		// time, so that a loaded machine cannot fail it: the fixed hash took about 240 times
		// as long (quadratic in n), the seeded one about as long.
		plain := plainFile(n)
		base := fastest(func() {
			if _, err := ParseRanks(plain); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("chain=%v: %d colliding tokens (%d bytes) loaded in %v, ordinary ones in %v", chain, n, len(data), elapsed, base)
		if elapsed > slower*base {
			t.Errorf("chain=%v: loaded in %v, over %d× the %v of ordinary tokens", chain, elapsed, slower, base)
		}
		if !r.seeded {
			t.Error("the crafted file must move the table to the seeded hash")
		}
		if run := r.longestRun(); run > maxProbe {
			t.Errorf("longest run %d, bound %d", run, maxProbe)
		}
		if r.Len() != n+256 {
			t.Fatalf("%d ranks, want %d", r.Len(), n+256)
		}
		// Failed lookups of tokens crafted the same way stay short too.
		miss := collisionFile(t, 2*n, chain)
		missRanks, _ := ParseRanks(miss)
		lookups := func(in *Ranks) time.Duration {
			return fastest(func() {
				for i := 256 + n; i < missRanks.Len(); i += 7 {
					tok, _ := missRanks.Token(i)
					if _, ok := in.Rank(tok); ok {
						t.Fatalf("crafted token %d not in the table was found", i)
					}
				}
			})
		}
		plainRanks, err := ParseRanks(plain)
		if err != nil {
			t.Fatal(err)
		}
		if d, b := lookups(r), lookups(plainRanks); d > slower*b {
			t.Errorf("chain=%v: failed lookups took %v, over %d× the %v in a table of ordinary tokens", chain, d, slower, b)
		}
		for i := 256; i < r.Len(); i += 997 {
			tok, _ := r.Token(i)
			got, ok := r.Rank(tok)
			if !ok || got != i {
				t.Errorf("token %d found at rank %d, %v", i, got, ok)
			}
		}
	}
}

// Real vocabularies keep the fixed hash (the faster lookup) and short runs.
func TestRankFixedHashKeptForRealFiles(t *testing.T) {
	for _, fe := range loadFixtures(t).encs {
		r := fe.enc.Ranks()
		if r.seeded {
			t.Errorf("%s: moved to the seeded hash", fe.name)
		}
		if run := r.longestRun(); run >= maxProbe/2 {
			t.Errorf("%s: longest run %d, want under %d", fe.name, run, maxProbe/2)
		}
		t.Logf("%s: %d tokens, longest run %d", fe.name, r.Len(), r.longestRun())
	}
}

// BenchmarkRankLookup looks every token of the fixture vocabularies up once
// per iteration (the encoder's hot lookup: lengths 1..maxLen).
func BenchmarkRankLookup(b *testing.B) {
	for _, fe := range loadFixtures(b).encs {
		r := fe.enc.Ranks()
		toks := make([][]byte, r.Len())
		for i := range toks {
			toks[i], _ = r.Token(i)
		}
		b.Run(fe.name, func(b *testing.B) {
			for b.Loop() {
				for _, tk := range toks {
					if _, ok := r.Rank(tk); !ok {
						b.Fatal("lost token")
					}
				}
			}
		})
	}
}

// FuzzParseRanksAdversarial: the fuzzer picks where the former fixed hash of
// each 8-byte token lands (a base slot, a stride and a count), so it steers
// toward probe chains and runs; loading stays correct and the table's runs
// stay short, whichever hash the loader ends up using.
func FuzzParseRanksAdversarial(f *testing.F) {
	f.Add(uint64(0x5a5a5a5a), uint64(1)<<32, uint16(2000), uint8(0))
	f.Add(uint64(0), uint64(1), uint16(4000), uint8(1))
	f.Add(uint64(7), uint64(1<<12), uint16(3000), uint8(2))
	f.Fuzz(func(t *testing.T, base, stride uint64, count uint16, extra uint8) {
		n := int(count%6000) + 1
		rf := newRankFile()
		seen := map[uint64]bool{}
		var tok [8]byte
		for j := range n {
			k := unsplitmix(base+uint64(j)*stride) ^ lenMix8
			if seen[k] {
				continue
			}
			seen[k] = true
			binary.LittleEndian.PutUint64(tok[:], k)
			// extra shortens some tokens to 7 bytes, mixing lengths (and so
			// hash inputs) into the crafted set.
			if extra != 0 && j%int(extra) == 0 {
				rf.add(tok[:7])
				continue
			}
			rf.add(tok[:])
		}
		r, err := ParseRanks(rf.buf.Bytes())
		if err != nil {
			// 7-byte prefixes can repeat; anything else is a loader bug.
			var re *RankFileError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), "already has rank") {
				t.Fatalf("refused a valid file: %v", err)
			}
			return
		}
		if run := r.longestRun(); run > maxProbe {
			t.Fatalf("longest run %d > %d (seeded %v)", run, maxProbe, r.seeded)
		}
		for i := range r.Len() {
			tk, _ := r.Token(i)
			if got, ok := r.Rank(tk); !ok || got != i {
				t.Fatalf("rank %d lost", i)
			}
		}
	})
}
