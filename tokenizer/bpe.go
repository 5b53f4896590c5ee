package tokenizer

import "math"

// heapThreshold is the piece length from which merging uses the heap: below
// it the quadratic scan over a small array is faster.
const heapThreshold = 100

const noRank = math.MaxUint32

// bpe appends the ranks of piece (SPEC §10.5): the piece's own rank if it is
// a token, else the result of lowest-rank-first, leftmost-on-ties merging.
func (r *Ranks) bpe(dst []int, piece string, sc *scratch) []int {
	if len(piece) == 1 {
		return append(dst, int(r.byte1[piece[0]]))
	}
	if rk, ok := r.lookup(piece); ok {
		return append(dst, int(rk))
	}
	if len(piece) < heapThreshold {
		return r.bpeSmall(dst, piece, sc)
	}
	return r.bpeHeap(dst, piece, sc, nil)
}

// scratch holds buffers reused across the pieces of one Encode call.
type scratch struct {
	small []smallPart
	parts []heapPart
	heap  mergeHeap
}

type smallPart struct {
	start int
	rank  uint32 // rank of piece[start : start of the part after next]
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

// bpeSmall is tiktoken's array algorithm: parts[i].rank is the rank of the
// pair starting at part i, and each step merges the minimum, leftmost first.
func (r *Ranks) bpeSmall(dst []int, piece string, sc *scratch) []int {
	n := len(piece)
	if cap(sc.small) < n+1 {
		sc.small = make([]smallPart, n+1, max(n+1, heapThreshold+1))
	}
	parts := sc.small[:n+1]
	for i := range parts {
		parts[i] = smallPart{i, noRank}
	}
	for i := 0; i+2 <= n; i++ {
		parts[i].rank = r.pairRank(piece, i, i+2)
	}
	for len(parts) > 2 {
		minR, mi := uint32(noRank), -1
		for i := 0; i+2 < len(parts); i++ {
			if parts[i].rank < minR {
				minR, mi = parts[i].rank, i
			}
		}
		if mi < 0 {
			break
		}
		// Merge parts mi and mi+1, then refresh the pair ranks that changed.
		copy(parts[mi+1:], parts[mi+2:])
		parts = parts[:len(parts)-1]
		if mi+2 < len(parts) {
			parts[mi].rank = r.pairRank(piece, parts[mi].start, parts[mi+2].start)
		} else {
			parts[mi].rank = noRank
		}
		if mi > 0 {
			parts[mi-1].rank = r.pairRank(piece, parts[mi-1].start, parts[mi+1].start)
		}
	}
	for i := 0; i+1 < len(parts); i++ {
		a, b := parts[i].start, parts[i+1].start
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
			if rk := r.pairRank(piece, int(s), int(parts[end].next)); rk != noRank {
				parts[s].pairRank = rk
				h.push(mkEntry(rk, s))
				pushes++
			}
		}
		if p := parts[s].prev; p >= 0 {
			rk := r.pairRank(piece, int(p), int(end))
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
