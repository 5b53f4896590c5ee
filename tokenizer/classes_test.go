package tokenizer

import (
	"testing"
	"unicode"
)

// TestClassesAllCodePoints compares the class bits of every code point
// (table or slow path) with a direct evaluation of the §10.4 classes
// through unicode.Is, and the slow path with the table where both apply.
func TestClassesAllCodePoints(t *testing.T) {
	tab := classTab()
	is := func(c rune, ts ...*unicode.RangeTable) bool {
		for _, rt := range ts {
			if unicode.Is(rt, c) {
				return true
			}
		}
		return false
	}
	for c := rune(0); c <= unicode.MaxRune; c++ {
		han := is(c, unicode.Han)
		up := is(c, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
		lo := is(c, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
		var want uint8
		for _, b := range []struct {
			on  bool
			bit uint8
		}{
			{is(c, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Lm, unicode.Lo), cL},
			{is(c, unicode.Nd, unicode.Nl, unicode.No), cN},
			{is(c, unicode.White_Space), cWS},
			{han, cHan}, {up, cUP}, {lo, cLO}, {up && !han, cUPK}, {lo && !han, cLOK},
		} {
			if b.on {
				want |= b.bit
			}
		}
		if got := classOf(tab, c); got != want {
			t.Fatalf("U+%04X: class %08b, want %08b", c, got, want)
		}
		if c < tableLimit && c%7 == 0 {
			if got := slowClass(c); got != want {
				t.Fatalf("U+%04X: slow class %08b, want %08b", c, got, want)
			}
		}
	}
	ws := 0
	for c := rune(0); c <= unicode.MaxRune; c++ {
		if classOf(tab, c)&cWS != 0 {
			ws++
		}
	}
	if ws != 25 {
		t.Errorf("%d White_Space code points, §10.4 lists 25", ws)
	}
	py := 0
	for c := rune(0); c < 0x10000; c++ {
		if isPySpace(c, classOf(tab, c)) {
			py++
		}
	}
	if py != 29 {
		t.Errorf("%d str.isspace code points, §10.6 says 29", py)
	}
}
