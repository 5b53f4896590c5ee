package tokenizer

// Merging text in a non-Latin script spends most of its steps inside
// characters: a CJK character is three bytes, so a run of k characters
// starts as 3k parts, and about 2k of the merges only rebuild characters
// before any merge joins two of them. bpeChars gets the same result from k
// parts by letting each character complete in one step, when the vocabulary
// proves the shortcut cannot change the merges.
//
// The argument. Run the merges of one character C on its own bytes (its
// "own run") and let M(C) be the highest rank among them. While the real
// run has not finished C's own merges, a merge that joins a fragment of C
// to something outside C makes a token that is not a sequence of whole
// characters (it starts inside one or ends inside one; see structural) and
// that contains the two bytes on either side of C's edge. If every such token ranks above M(C), no such
// merge can be the lowest-ranked candidate while C still has a merge of its
// own pending (that merge ranks at most M(C)), so C's bytes merge exactly as
// in its own run, unaffected by the rest of the piece, and nothing else
// can see C until its own run ends. Since C's own merges create no other
// candidate, the real run is the same as one in which C is a single part
// whose own run happens in one step ranked M(C): that step is taken at the
// first moment every other candidate ranks above M(C), which is when the
// real run takes C's last own merge. If moreover M(C) ranks below every
// longer token that contains C's bytes (ext below), C may start complete
// ("eager"): every candidate that involves the complete C then ranks above
// M(C), and until C's step every merge taken ranks below M(C), so having C
// complete earlier changes no choice. A character that fails the test, and
// every byte outside 2- and 3-byte characters, starts as single-byte parts
// and merges as in bpeSmall; the test of one character does not depend on
// how its neighbours start.

// charTable holds what bpeChars needs besides the ranks.
type charTable struct {
	// own is indexed by code point (2-byte characters U+0080..U+07FF and
	// 3-byte ones U+0800..U+FFFF, so the two never collide): the shape
	// of the character's own run in the top two bits and M in the rest.
	own [0x10000]uint32
	// cross is indexed by two adjacent bytes b0<<8|b1: the lowest rank of
	// a token that is not valid UTF-8 and holds b0 b1; noRank if none.
	cross [0x10000]uint32
}

// The shapes of a character's own run.
const (
	ownNone  = 0 // no merge: the character stays single bytes
	ownWhole = 1 // it ends as one token
	ownLeft  = 2 // 3-byte, ends as [b0 b1][b2]
	ownRight = 3 // 3-byte, ends as [b0][b1 b2]

	ownShift = 30
	// ownEager marks a whole character that may also start complete
	// (M below ext; see the argument above).
	ownEager = 1 << 29
	ownMask  = ownEager - 1
)

// newCharTable builds the table, or returns nil if ranks do not fit in the
// packing (never for real vocabularies).
func newCharTable(r *Ranks, char3 *char3Table) *charTable {
	if r.Len() >= ownMask || char3 == nil {
		return nil
	}
	t := new(charTable)
	for i := range t.cross {
		t.cross[i] = noRank
	}
	for rank := range r.Len() {
		b, _ := r.Token(rank)
		if structural(b) {
			continue
		}
		for j := 0; j+1 < len(b); j++ {
			k := uint16(b[j])<<8 | uint16(b[j+1])
			t.cross[k] = min(t.cross[k], uint32(rank))
		}
	}
	// ext[cp] is the lowest rank of a token that holds the character cp
	// and more bytes.
	ext := make([]uint32, 0x10000)
	for i := range ext {
		ext[i] = noRank
	}
	for rank := range r.Len() {
		b, _ := r.Token(rank)
		for j := 0; j+1 < len(b); j++ {
			cp, size := -1, 0
			switch c := b[j]; {
			case c >= 0xc2 && c < 0xe0 && b[j+1]&0xc0 == 0x80:
				cp, size = int(c&0x1f)<<6|int(b[j+1]&0x3f), 2
			case c >= 0xe0 && c < 0xf0 && j+2 < len(b) && b[j+1]&0xc0 == 0x80 && b[j+2]&0xc0 == 0x80:
				cp, size = int(c&0x0f)<<12|int(b[j+1]&0x3f)<<6|int(b[j+2]&0x3f), 3
			}
			if cp >= 0x80 && len(b) > size {
				ext[cp] = min(ext[cp], uint32(rank))
			}
		}
	}
	pair := func(a, b byte) uint32 {
		if r.pair2 == nil { // no 2-byte tokens: no character has a merge
			return noRank
		}
		return r.pair2[uint16(a)|uint16(b)<<8]
	}
	whole := func(cp int, m uint32) uint32 {
		if m < ext[cp] {
			return ownWhole<<ownShift | ownEager | m
		}
		return ownWhole<<ownShift | m
	}
	for cp := 0x80; cp < 0x800; cp++ {
		b0, b1 := byte(0xc0|cp>>6), byte(0x80|cp&0x3f)
		if c := pair(b0, b1); c != noRank {
			t.own[cp] = whole(cp, c)
		}
	}
	for cp := 0x800; cp < 0x10000; cp++ {
		b0, b1, b2 := byte(0xe0|cp>>12), byte(0x80|cp>>6&0x3f), byte(0x80|cp&0x3f)
		p, q, c := pair(b0, b1), pair(b1, b2), char3[cp]
		first := min(p, q)
		switch {
		case first == noRank:
			// ownNone: t.own[cp] is zero
		case c != noRank:
			t.own[cp] = whole(cp, max(first, c))
		case p < q:
			t.own[cp] = ownLeft<<ownShift | first
		default:
			t.own[cp] = ownRight<<ownShift | first
		}
	}
	return t
}

// structural reports whether b is a sequence of whole characters: ASCII
// bytes and lead bytes followed by all their continuation bytes (overlong
// and surrogate forms included; only the byte structure matters here).
func structural(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		n := 0
		switch {
		case c < 0x80:
		case c >= 0xc0 && c < 0xe0:
			n = 1
		case c >= 0xe0 && c < 0xf0:
			n = 2
		case c >= 0xf0 && c < 0xf8:
			n = 3
		default:
			return false
		}
		if i+n >= len(b) {
			return false
		}
		for k := 1; k <= n; k++ {
			if b[i+k]&0xc0 != 0x80 {
				return false
			}
		}
		i += n + 1
	}
	return true
}

// bpeChars is bpeSmall over characters (see the argument above). A part
// whose token is noRank is a character whose own run is still pending; its
// candidate is M.
func (r *Ranks) bpeChars(dst []int, piece string, sc *scratch) []int {
	n := len(piece)
	ct := sc.charTable()
	if cap(sc.starts) < n+1 {
		c := max(n+1, min(memoMaxPiece, heapThreshold)+1)
		sc.starts = make([]int32, c)
		sc.ranks = make([]uint32, c)
	}
	if cap(sc.toks) < n {
		sc.toks = make([]uint32, cap(sc.starts))
	}
	starts, cand, toks := sc.starts[:0], sc.ranks[:0], sc.toks[:0]
	for i := 0; i < n; {
		b0, size, cp := piece[i], 1, 0
		switch {
		case b0 < 0xc2:
		case b0 < 0xe0:
			if i+1 < n && piece[i+1]&0xc0 == 0x80 {
				size, cp = 2, int(b0&0x1f)<<6|int(piece[i+1]&0x3f)
			}
		case b0 < 0xf0:
			if i+2 < n && piece[i+1]&0xc0 == 0x80 && piece[i+2]&0xc0 == 0x80 {
				cp = int(b0&0x0f)<<12 | int(piece[i+1]&0x3f)<<6 | int(piece[i+2]&0x3f)
				if cp >= 0x800 {
					size = 3
				}
			}
		}
		if size > 1 {
			own := ct.own[cp]
			m := own & ownMask
			end := i + size
			if own>>ownShift != ownNone &&
				(i == 0 || m < ct.cross[uint16(piece[i-1])<<8|uint16(b0)]) &&
				(end == n || m < ct.cross[uint16(piece[end-1])<<8|uint16(piece[end])]) {
				starts = append(starts, int32(i))
				if st := sc.charStats; st != nil {
					st.starts[own>>ownShift]++
					if own&ownEager != 0 {
						st.eager++
					}
				}
				if own&ownEager != 0 {
					cand = append(cand, noRank)
					if size == 2 {
						toks = append(toks, m)
					} else {
						toks = append(toks, sc.char3[cp])
					}
				} else {
					cand = append(cand, m)
					toks = append(toks, noRank)
				}
				i = end
				continue
			}
		}
		if st := sc.charStats; st != nil && size > 1 {
			st.refused++
		}
		for k := i; k < i+size; k++ {
			starts = append(starts, int32(k))
			cand = append(cand, noRank)
			toks = append(toks, r.byte1[piece[k]])
		}
		i += size
	}
	starts = append(starts, int32(n))
	for i := 0; i+1 < len(toks); i++ {
		if toks[i] != noRank && toks[i+1] != noRank {
			cand[i] = sc.pairRank(r, piece, int(starts[i]), int(starts[i+2]))
		}
	}
	for {
		minR, mi := uint32(noRank), -1
		for i, rk := range cand {
			if rk < minR {
				minR, mi = rk, i
			}
		}
		if mi < 0 {
			break
		}
		if toks[mi] == noRank {
			// The character at mi ends its own run.
			s := int(starts[mi])
			b0 := piece[s]
			last := mi // the part holding the character's last byte
			if b0 < 0xe0 {
				toks[mi] = r.pair2[uint16(b0)|uint16(piece[s+1])<<8]
			} else {
				b1, b2 := piece[s+1], piece[s+2]
				cp := int(b0&0x0f)<<12 | int(b1&0x3f)<<6 | int(b2&0x3f)
				switch ct.own[cp] >> ownShift {
				case ownWhole:
					toks[mi] = sc.char3[cp]
				case ownLeft:
					starts, cand, toks = splitPart(starts, cand, toks, mi, int32(s+2))
					toks[mi], toks[mi+1] = r.pair2[uint16(b0)|uint16(b1)<<8], r.byte1[b2]
					last = mi + 1
				default:
					starts, cand, toks = splitPart(starts, cand, toks, mi, int32(s+1))
					toks[mi], toks[mi+1] = r.byte1[b0], r.pair2[uint16(b1)|uint16(b2)<<8]
					last = mi + 1
				}
			}
			// A character split in two has no merge left between its
			// halves (its own run ended there).
			cand[mi] = noRank
			if last+1 < len(toks) && toks[last+1] != noRank {
				cand[last] = sc.pairRank(r, piece, int(starts[last]), int(starts[last+2]))
			}
		} else {
			// Merge parts mi and mi+1 (both tokens).
			toks[mi] = minR
			copy(starts[mi+1:], starts[mi+2:])
			copy(cand[mi+1:], cand[mi+2:])
			copy(toks[mi+1:], toks[mi+2:])
			starts, cand, toks = starts[:len(starts)-1], cand[:len(cand)-1], toks[:len(toks)-1]
			cand[mi] = noRank
			if mi+1 < len(toks) && toks[mi+1] != noRank {
				cand[mi] = sc.pairRank(r, piece, int(starts[mi]), int(starts[mi+2]))
			}
		}
		if mi > 0 && toks[mi-1] != noRank {
			cand[mi-1] = sc.pairRank(r, piece, int(starts[mi-1]), int(starts[mi+1]))
		}
	}
	for _, t := range toks {
		dst = append(dst, int(t))
	}
	sc.starts, sc.ranks, sc.toks = starts[:0], cand[:0], toks[:0]
	return dst
}

// charStats counts, for tests, how bpeChars started the characters it saw.
type charStats struct {
	starts  [4]int // by the shape of the character's own run
	eager   int    // of them, whole characters that started complete
	refused int    // 2- and 3-byte characters that started as bytes
}

// splitPart makes part i two parts, the second starting at byte at. The slices
// have room: there are never more parts than bytes.
func splitPart(starts []int32, cand, toks []uint32, i int, at int32) ([]int32, []uint32, []uint32) {
	starts = append(starts, 0)
	cand = append(cand, 0)
	toks = append(toks, 0)
	copy(starts[i+2:], starts[i+1:])
	copy(cand[i+2:], cand[i+1:])
	copy(toks[i+2:], toks[i+1:])
	starts[i+1] = at
	cand[i+1] = noRank
	return starts, cand, toks
}
