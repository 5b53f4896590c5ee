package tokenizer

import "math"

// heapThreshold is the piece length from which merging uses the heap: below
// it the quadratic scan over a small array is faster.
const heapThreshold = 100

// charsHeapThreshold is heapThreshold for pieces with bytes outside ASCII,
// which bpeChars merges in about a third as many parts.
const charsHeapThreshold = 256

const noRank = math.MaxUint32

// bpe appends the ranks of piece (§10.5): the piece's own rank if it is
// a token, else the result of lowest-rank-first, leftmost-on-ties merging.
func (r *Ranks) bpe(dst []int, piece string, sc *scratch) []int {
	switch len(piece) {
	case 0:
		return dst
	case 1:
		return append(dst, int(r.byte1[piece[0]]))
	case 2:
		if rk, ok := r.lookup(piece); ok {
			return append(dst, int(rk))
		}
		return append(dst, int(r.byte1[piece[0]]), int(r.byte1[piece[1]]))
	}
	if len(piece) > memoMaxPiece {
		if rk, ok := r.lookup(piece); ok {
			return append(dst, int(rk))
		}
		if len(piece) < heapThreshold || (len(piece) < charsHeapThreshold && !ascii(piece) && sc.charTable() != nil) {
			return r.bpeArray(dst, piece, sc)
		}
		return r.bpeHeap(dst, piece, sc, nil)
	}
	// One hash serves the rank table and the memo.
	k := pack8(piece)
	h := r.hash(piece, k)
	if rk, ok := r.probe(piece, k, h); ok {
		return append(dst, int(rk))
	}
	var slot *memoSlot
	if cl := memoClass(piece); !sc.memoOff[cl] {
		if sc.memo != nil {
			slot = &sc.memo[h>>(64-sc.memoBits)]
			if slot.n > 0 && slot.piece == piece {
				sc.memoHits[cl]++
				for _, id := range slot.ids[:slot.n] {
					dst = append(dst, int(id))
				}
				return dst
			}
			if sc.memoMiss[cl]++; sc.memoMiss[cl] == memoJudge && sc.memoHits[cl] < memoJudge/memoWorth {
				sc.memoOff[cl] = true
				slot = nil
			}
		}
		if sc.merged++; sc.merged >= memoAfter && sc.memoBits < memoMaxBits && sc.merged > memoGrow*len(sc.memo) {
			sc.growMemo()
			slot = nil
		}
	}
	from := len(dst)
	dst = r.bpeArray(dst, piece, sc)
	if ids := dst[from:]; slot != nil && len(ids) <= len(slot.ids) {
		slot.piece, slot.n = piece, uint32(len(ids))
		for i, id := range ids {
			slot.ids[i] = uint32(id)
		}
	}
	return dst
}

// charTable returns the bpeChars table, fetching it from the encoding the
// first time (nil: merge byte by byte).
func (sc *scratch) charTable() *charTable {
	if sc.chars == nil && sc.enc != nil {
		sc.chars = sc.enc.charTable()
	}
	return sc.chars
}

// bpeArray merges a piece short enough for the array algorithms, by
// characters if it has any outside ASCII.
func (r *Ranks) bpeArray(dst []int, piece string, sc *scratch) []int {
	if !ascii(piece) && sc.charTable() != nil {
		return r.bpeChars(dst, piece, sc)
	}
	return r.bpeSmall(dst, piece, sc)
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// The merges of a piece depend on nothing but its bytes, and real text
// repeats its words: a piece that is not itself a token costs tens of rank
// lookups to merge, a repeated one a probe of the memo, a direct-mapped
// cache indexed by the hash already computed to look the piece up. A piece
// that maps to a taken slot replaces its occupant (a piece of more than
// seven ids is not remembered), so storing never grows the memo, and the
// common words of a text stay in it. It lives in the scratch of one Encode
// call (or of one EncodeBatch worker) and holds no state between calls.
//
// A short text never pays for the memo, and a long one gets a large memo
// only once it has merged pieces enough to fill it many times over: the
// memo starts at memoMinBits after memoAfter merged pieces and grows by
// four times (dropping what it holds) each time the pieces merged since
// it was sized reach memoGrow per slot, up to memoMaxBits (768 KiB).
const (
	memoMaxPiece = 64 // longest piece remembered, in bytes
	memoAfter    = 32
	memoMinBits  = 8
	memoMaxBits  = 14
	memoGrow     = 4
)

// The memo pays for itself only when pieces repeat: runs of Han characters
// (the pieces of Chinese text) repeat several times less often than words
// do, and probing and filling the memo for them costs more than the merges
// it saves. So the memo counts its hits and misses separately for pieces
// that start with a CJK character and for the others, and after memoJudge
// misses of a class stops serving it if it had fewer than one hit per
// memoWorth misses.
const (
	memoJudge = 4096
	memoWorth = 4
)

// memoClass is 1 for a piece that starts (after at most a space) with a
// 3-byte character of the CJK blocks U+3000..U+9FFF, else 0.
func memoClass(piece string) int {
	c := piece[0]
	if c == ' ' {
		c = piece[1]
	}
	if c >= 0xe3 && c <= 0xe9 {
		return 1
	}
	return 0
}

// growMemo makes the memo memoMinBits or four times larger.
func (sc *scratch) growMemo() {
	if sc.memo == nil {
		sc.memoBits = memoMinBits
	} else {
		sc.memoBits = min(sc.memoBits+2, memoMaxBits)
	}
	sc.memo = make([]memoSlot, 1<<sc.memoBits)
	sc.merged = 0
}

// memoSlot remembers the ids of one piece; n = 0 marks it empty.
type memoSlot struct {
	piece string
	n     uint32
	ids   [7]uint32
}

// scratch holds buffers reused across the pieces of one Encode call.
type scratch struct {
	char3    *char3Table // the encoding's 3-byte token ranks; nil: none
	enc      *Encoding   // whose bpeChars table charTable fetches; nil: none
	chars    *charTable  // the table, once fetched
	starts   []int32     // bpeSmall: start of each part, then the piece's end
	ranks    []uint32    // bpeSmall: rank of the pair starting at each part
	toks     []uint32    // bpeChars: token of each part
	parts    []heapPart
	heap     mergeHeap
	memo     []memoSlot // 1<<memoBits slots, or nil
	memoBits uint
	merged   int // pieces of served classes merged since the memo was sized
	// memoHits and memoMiss count the probes of each memoClass until
	// memoJudge misses; memoOff is set for a class the memo stops serving.
	memoHits, memoMiss [2]int
	memoOff            [2]bool
	// charStats, if set (tests only), counts bpeChars' decisions.
	charStats *charStats
}

// char3Table holds, for every code point U+0800..U+FFFF, the rank of its
// 3-byte UTF-8 encoding (noRank if that is not a token). Most of the rank
// lookups while merging CJK text are of single characters; this dense
// table (256 KiB, cache resident) answers them without hashing into the
// rank table.
type char3Table [0x10000]uint32

// newChar3Table builds the table from r.
func newChar3Table(r *Ranks) *char3Table {
	t := new(char3Table)
	for i := range t {
		t[i] = noRank
	}
	for i := range r.Len() {
		b, _ := r.Token(i)
		if cp, ok := char3(b); ok {
			t[cp] = uint32(i)
		}
	}
	return t
}

// char3 decodes b if it is exactly one well-formed 3-byte UTF-8 sequence
// (surrogates included: the table answers for any such bytes).
func char3(b []byte) (rune, bool) {
	if len(b) != 3 || b[0]&0xf0 != 0xe0 || b[1]&0xc0 != 0x80 || b[2]&0xc0 != 0x80 {
		return 0, false
	}
	cp := rune(b[0]&0x0f)<<12 | rune(b[1]&0x3f)<<6 | rune(b[2]&0x3f)
	return cp, cp >= 0x800
}

// pairRank is r.pairRank with 3-byte characters answered from the table.
func (sc *scratch) pairRank(r *Ranks, piece string, a, b int) uint32 {
	if b-a == 3 && sc.char3 != nil {
		c0, c1, c2 := piece[a], piece[a+1], piece[a+2]
		if c0&0xf0 == 0xe0 && c1&0xc0 == 0x80 && c2&0xc0 == 0x80 {
			if cp := rune(c0&0x0f)<<12 | rune(c1&0x3f)<<6 | rune(c2&0x3f); cp >= 0x800 {
				return sc.char3[cp]
			}
		}
	}
	return r.pairRank(piece, a, b)
}

// heapPart is one part of a long piece, 16 bytes so four share a cache
// line. A part absorbed into its left neighbour is marked by prev = dead.
type heapPart struct {
	next, prev int32  // starts of the neighbours; n / -1 at the ends
	rank       uint32 // rank of this part
	pairRank   uint32 // rank of this part joined with the next; noRank if none
}

const dead = -2

// pairRank is the rank of piece[a:b], or noRank.
func (r *Ranks) pairRank(piece string, a, b int) uint32 {
	if b-a > r.maxLen {
		return noRank
	}
	if rk, ok := r.lookup(piece[a:b]); ok {
		return rk
	}
	return noRank
}

// bpeSmall is tiktoken's array algorithm: ranks[i] is the rank of the pair
// starting at part i, and each step merges the minimum, leftmost first. The
// starts and ranks sit in two dense arrays, so the minimum scan reads four
// bytes per part and a merge moves eight.
func (r *Ranks) bpeSmall(dst []int, piece string, sc *scratch) []int {
	n := len(piece)
	if cap(sc.starts) < n+1 {
		c := max(n+1, min(memoMaxPiece, heapThreshold)+1)
		sc.starts = make([]int32, c)
		sc.ranks = make([]uint32, c)
	}
	starts, ranks := sc.starts[:n+1], sc.ranks[:n+1]
	for i := range starts {
		starts[i] = int32(i)
		ranks[i] = noRank
	}
	for i := 0; i+2 <= n; i++ {
		ranks[i] = sc.pairRank(r, piece, i, i+2)
	}
	for len(starts) > 2 {
		minR, mi := uint32(noRank), -1
		for i, rk := range ranks[:len(ranks)-2] {
			if rk < minR {
				minR, mi = rk, i
			}
		}
		if mi < 0 {
			break
		}
		// Merge parts mi and mi+1, then refresh the pair ranks that changed.
		copy(starts[mi+1:], starts[mi+2:])
		copy(ranks[mi+1:], ranks[mi+2:])
		starts, ranks = starts[:len(starts)-1], ranks[:len(ranks)-1]
		if mi+2 < len(starts) {
			ranks[mi] = sc.pairRank(r, piece, int(starts[mi]), int(starts[mi+2]))
		} else {
			ranks[mi] = noRank
		}
		if mi > 0 {
			ranks[mi-1] = sc.pairRank(r, piece, int(starts[mi-1]), int(starts[mi+1]))
		}
	}
	for i := 0; i+1 < len(starts); i++ {
		a, b := starts[i], starts[i+1]
		if b-a == 1 {
			dst = append(dst, int(r.byte1[piece[a]]))
			continue
		}
		rk, _ := r.lookup(piece[a:b]) // always present: parts are merged tokens
		dst = append(dst, int(rk))
	}
	return dst
}

// bpeStats counts heap work, so tests can assert near-linear behaviour.
type bpeStats struct {
	pushes, pops, merges int
}

// A heap entry is a candidate merge packed as rank<<32 | start: one integer
// comparison orders by rank and then leftmost start. The entry is current
// while parts[start] is not dead and its pairRank still equals rank: a pair's
// rank identifies its bytes, and every change to a part or its right
// neighbour recomputes pairRank, so older entries show up as stale.
func mkEntry(rank uint32, start int32) uint64 { return uint64(rank)<<32 | uint64(uint32(start)) }

// mergeHeap is an 8-ary min-heap of packed entries. Its first heapPad slots
// are unused so that the eight children of a node (indices 8i+8 .. 8i+15
// after the shift) fill one 64-byte cache line: a sift costs one memory
// access per level over a third as many levels as a binary heap, which
// matters once a megabyte piece makes the heap larger than the caches.
type mergeHeap []uint64

const (
	heapArity = 8
	heapPad   = heapArity - 1
)

func newMergeHeap(capacity int) mergeHeap {
	return make(mergeHeap, heapPad, capacity+heapPad)
}

func (h mergeHeap) size() int { return len(h) - heapPad }

func (h *mergeHeap) reset() { *h = (*h)[:heapPad] }

func (h *mergeHeap) push(e uint64) {
	*h = append(*h, e)
	a := (*h)[heapPad:]
	siftUp(a, len(a)-1, e)
}

// siftUp moves the hole at i towards the root past every parent greater than
// e and stores e there.
func siftUp(a []uint64, i int, e uint64) {
	for i > 0 {
		p := (i - 1) / heapArity
		if a[p] <= e {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = e
}

// pop removes the minimum. It walks the hole left by the root down along
// the smallest children to a leaf and then sifts the last element up from
// there ("bottom-up" deletion): the last element usually belongs near a
// leaf, so this saves most comparisons against it.
func (h *mergeHeap) pop() uint64 {
	a := (*h)[heapPad:]
	top := a[0]
	last := len(a) - 1
	x := a[last]
	a = a[:last]
	*h = (*h)[:heapPad+last]
	if last == 0 {
		return top
	}
	i := 0
	for {
		c := heapArity*i + 1
		if c >= last {
			break
		}
		m := c
		for d := c + 1; d < c+heapArity && d < last; d++ {
			if a[d] < a[m] {
				m = d
			}
		}
		a[i] = a[m]
		i = m
	}
	siftUp(a, i, x)
	return top
}

// bpeHeap gives the same merges as bpeSmall in O(n log n): parts form a
// linked list over byte offsets and candidate pairs sit in a min-heap
// ordered by (rank, start); stale entries are skipped when popped.
func (r *Ranks) bpeHeap(dst []int, piece string, sc *scratch, st *bpeStats) []int {
	n := len(piece)
	if cap(sc.parts) < n {
		sc.parts = make([]heapPart, n)
		sc.heap = newMergeHeap(n)
	}
	parts := sc.parts[:n]
	h := sc.heap
	h.reset()
	for i := 0; i < n; i++ {
		parts[i] = heapPart{int32(i + 1), int32(i - 1), r.byte1[piece[i]], noRank}
	}
	for i := 0; i+2 <= n; i++ {
		if rk := r.pairRank(piece, i, i+2); rk != noRank {
			parts[i].pairRank = rk
			h.push(mkEntry(rk, int32(i)))
		}
	}
	pushes, pops, merges := h.size(), 0, 0
	for h.size() > 0 {
		e := h.pop()
		pops++
		rank, s := uint32(e>>32), int32(uint32(e))
		if parts[s].pairRank != rank || parts[s].prev == dead {
			continue
		}
		// Merge s with its right neighbour m.
		m := parts[s].next
		end := parts[m].next
		parts[m].prev = dead
		parts[s].next = end
		parts[s].rank = rank
		parts[s].pairRank = noRank
		merges++
		if int(end) < n {
			parts[end].prev = s
			if rk := sc.pairRank(r, piece, int(s), int(parts[end].next)); rk != noRank {
				parts[s].pairRank = rk
				h.push(mkEntry(rk, s))
				pushes++
			}
		}
		if p := parts[s].prev; p >= 0 {
			rk := sc.pairRank(r, piece, int(p), int(end))
			parts[p].pairRank = rk
			if rk != noRank {
				h.push(mkEntry(rk, p))
				pushes++
			}
		}
	}
	h.reset()
	sc.heap = h
	if st != nil {
		st.pushes, st.pops, st.merges = pushes, pops, merges
	}
	for s := int32(0); int(s) < n; s = parts[s].next {
		dst = append(dst, int(parts[s].rank))
	}
	return dst
}
