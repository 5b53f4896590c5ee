package tokenizer

import (
	"sync"
	"unicode"
)

// Code point class bits. UP/LO are the o200k letter classes
// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}]; UPK/LOK are
// the Kimi ones, the same minus Script=Han.
const (
	cL   uint8 = 1 << iota // \p{L}
	cN                     // \p{N}
	cWS                    // \s (Unicode White_Space, 25 code points)
	cHan                   // \p{Han} (Script, not Script_Extensions)
	cUP
	cLO
	cUPK
	cLOK
)

// tableLimit bounds the flat class table: it covers the BMP, the emoji plane
// and the Han extension planes; code points above it are classified with
// unicode.Is, which is slower but rare in text.
const tableLimit = 0x40000

var (
	classOnce  sync.Once
	classTable []uint8 // read-only after classOnce; a constant table built lazily
)

// classTab returns the flat class table, building it on first use. The table
// is derived only from Go's unicode tables, so it is the same in every
// process; building it walks range tables rather than testing each code
// point, which keeps the one-time cost well under a millisecond.
func classTab() []uint8 {
	classOnce.Do(func() {
		t := make([]uint8, tableLimit)
		set := func(rt *unicode.RangeTable, bit uint8) {
			for _, r := range rt.R16 {
				for c := int(r.Lo); c <= int(r.Hi) && c < tableLimit; c += int(r.Stride) {
					t[c] |= bit
				}
			}
			for _, r := range rt.R32 {
				for c := int(r.Lo); c <= int(r.Hi) && c < tableLimit; c += int(r.Stride) {
					t[c] |= bit
				}
			}
		}
		set(unicode.L, cL)
		set(unicode.N, cN)
		set(unicode.White_Space, cWS)
		set(unicode.Han, cHan)
		for _, rt := range []*unicode.RangeTable{unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M} {
			set(rt, cUP)
		}
		for _, rt := range []*unicode.RangeTable{unicode.Ll, unicode.Lm, unicode.Lo, unicode.M} {
			set(rt, cLO)
		}
		for c := range t {
			k := t[c]
			if k&cHan == 0 {
				k |= (k & cUP) << 2 // cUP -> cUPK
				k |= (k & cLO) << 2 // cLO -> cLOK
			}
			t[c] = k
		}
		classTable = t
	})
	return classTable
}

// classOf returns the class bits of c.
func classOf(tab []uint8, c rune) uint8 {
	if c >= 0 && c < tableLimit {
		return tab[c]
	}
	return slowClass(c)
}

// slowClass classifies a code point outside the flat table.
func slowClass(c rune) uint8 {
	var k uint8
	if unicode.IsLetter(c) {
		k |= cL
	}
	if unicode.IsNumber(c) {
		k |= cN
	}
	if unicode.Is(unicode.White_Space, c) {
		k |= cWS
	}
	han := unicode.Is(unicode.Han, c)
	if han {
		k |= cHan
	}
	mark := unicode.IsMark(c)
	lm, lo := unicode.Is(unicode.Lm, c), unicode.Is(unicode.Lo, c)
	if mark || lm || lo || unicode.Is(unicode.Lu, c) || unicode.Is(unicode.Lt, c) {
		k |= cUP
	}
	if mark || lm || lo || unicode.Is(unicode.Ll, c) {
		k |= cLO
	}
	if !han {
		k |= (k & cUP) << 2
		k |= (k & cLO) << 2
	}
	return k
}

// isPySpace reports Python's str.isspace: the 25 White_Space code points and
// U+001C..U+001F.
func isPySpace(c rune, k uint8) bool {
	return k&cWS != 0 || c >= 0x1c && c <= 0x1f
}
