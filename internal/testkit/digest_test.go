package testkit

import (
	"math"
	"testing"
)

func TestDigest(t *testing.T) {
	a, b := []float32{1, 2}, []float32{3}
	if Digest(a, b) != Digest([]float32{1, 2, 3}) {
		t.Fatal("Digest depends on how the values are split into slices")
	}
	if Digest([]float32{0}) == Digest([]float32{float32(math.Copysign(0, -1))}) {
		t.Fatal("Digest does not tell −0 from +0")
	}
	// FNV-1a of no bytes is its offset basis.
	if got := Digest(); got != 0xcbf29ce484222325 {
		t.Fatalf("Digest() = %#x", got)
	}
}

func TestSameBits(t *testing.T) {
	nan1, nan2 := math.Float32frombits(0x7fc00000), math.Float32frombits(0x7fc00001)
	for _, c := range []struct {
		a, b        []float32
		same, ornan bool
	}{
		{[]float32{1, 2}, []float32{1, 2}, true, true},
		{[]float32{1, 2}, []float32{1}, false, false},
		{[]float32{0}, []float32{float32(math.Copysign(0, -1))}, false, false},
		{[]float32{nan1}, []float32{nan2}, false, true},
	} {
		if SameBits(c.a, c.b) != c.same {
			t.Errorf("SameBits(%v, %v) = %v", c.a, c.b, !c.same)
		}
		var failed bool
		t.Run("", func(t *testing.T) {
			ft := &fatalT{TB: t}
			func() {
				defer func() { recover() }()
				RequireSameBitsOrNaN(ft, "x", c.a, c.b)
			}()
			failed = ft.failed
		})
		if failed == c.ornan {
			t.Errorf("RequireSameBitsOrNaN(%v, %v) failed=%v", c.a, c.b, failed)
		}
	}
}

// fatalT records a Fatalf instead of ending the test, which the bit checks
// are made to do.
type fatalT struct {
	testing.TB
	failed bool
}

func (f *fatalT) Fatalf(string, ...any) { f.failed = true; panic(f) }

func (f *fatalT) Helper() {}
