package floatbits

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// The references read the formats' definitions through field arithmetic
// (math.Ldexp, math.Pow), not through the bit assembly under test; binary16's
// is testkit.RefF16, which the kernels' tests share.

func refE4M3(b byte) float64 {
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	e := int(b>>3) & 15
	f := int(b & 7)
	switch {
	case e == 15 && f == 7:
		return math.NaN()
	case e == 0:
		return sign * float64(f) / 8 / 64
	}
	return sign * (1 + float64(f)/8) * math.Pow(2, float64(e-7))
}

// same compares values, and for zeros also the sign.
func same(got float32, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(float64(got))
	}
	return float64(got) == want && math.Signbit(float64(got)) == math.Signbit(want)
}

func TestF16Exhaustive(t *testing.T) {
	for h := range 1 << 16 {
		got := F16(uint16(h))
		want := testkit.RefF16(uint16(h))
		if !same(got, want) {
			t.Fatalf("F16(%#04x) = %g, want %g", h, got, want)
		}
		if want != want {
			// NaN: sign kept, payload moved to the top of the f32 mantissa.
			wantBits := uint32(h&0x8000)<<16 | 0x7f800000 | uint32(h&0x3ff)<<13
			if math.Float32bits(got) != wantBits {
				t.Fatalf("F16(%#04x) = %#08x, want NaN %#08x", h, math.Float32bits(got), wantBits)
			}
		}
	}
	// Anchors stated by §13.3.
	for h, want := range map[uint16]float64{0x0001: 0x1p-24, 0x03FF: 1023 * 0x1p-24, 0x0400: 0x1p-14, 0x3C00: 1, 0xC000: -2, 0x7BFF: 65504} {
		if got := F16(h); float64(got) != want {
			t.Errorf("F16(%#04x) = %v, want %v", h, got, want)
		}
	}
}

func TestBF16Exhaustive(t *testing.T) {
	for h := range 1 << 16 {
		if got := math.Float32bits(BF16(uint16(h))); got != uint32(h)<<16 {
			t.Fatalf("BF16(%#04x) = %#08x", h, got)
		}
	}
	if BF16(0x3f80) != 1 || BF16(0xc000) != -2 {
		t.Error("BF16 anchors")
	}
}

func TestFP8AllCodes(t *testing.T) {
	nan := 0
	for b := range 256 {
		if got, want := E4M3(byte(b)), refE4M3(byte(b)); !same(got, want) {
			t.Errorf("E4M3(%#02x) = %v, want %v", b, got, want)
		}
		if math.IsNaN(float64(E4M3(byte(b)))) {
			nan++
		}
		if got, want := E5M2(byte(b)), testkit.RefF16(uint16(b)<<8); !same(got, want) {
			t.Errorf("E5M2(%#02x) = %v, want %v", b, got, want)
		}
	}
	if nan != 2 {
		t.Errorf("E4M3 has %d NaN codes, want 2", nan)
	}
	if E4M3(0x7E) != 448 || E4M3(0xFE) != -448 || E4M3(0x01) != 0x1p-9 || E5M2(0x7B) != 57344 || !math.IsInf(float64(E5M2(0x7C)), 1) {
		t.Error("FP8 anchors")
	}
}

func TestWiden64(t *testing.T) {
	x := []float32{0, float32(math.Copysign(0, -1)), 1.5, -3.25e-40, float32(math.Inf(1)), math.MaxFloat32}
	buf := make([]float64, 1, 16)
	got := Widen64(buf, x)
	if &got[0] != &buf[0] {
		t.Error("Widen64 did not reuse a large enough destination")
	}
	for i, v := range x {
		if math.Float64bits(got[i]) != math.Float64bits(float64(v)) {
			t.Errorf("Widen64[%d] = %v, want %v", i, got[i], float64(v))
		}
	}
	if small := Widen64(make([]float64, 0, 2), x); len(small) != len(x) {
		t.Errorf("Widen64 into a short buffer: len %d, want %d", len(small), len(x))
	}
}

// refToF16 rounds |x| to the nearest of the finite binary16 values (half,
// ascending by pattern), ties to the even pattern, by search rather than bit
// assembly; 65520 and above (the midpoint past the largest) is infinity.
func refToF16(half []float64, x float32) uint16 {
	sign := uint16(0)
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	a := math.Abs(float64(x))
	if a >= 65520 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(half, a) // first value >= a
	switch {
	case i == len(half): // above the largest, below the midpoint to infinity
		return sign | uint16(i-1)
	case half[i] == a:
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	switch d := (a - half[lo]) - (half[hi] - a); {
	case d < 0:
		return sign | uint16(lo)
	case d > 0:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

func TestToF16(t *testing.T) {
	// Every pattern comes back from its widening, NaN payloads included.
	for h := range 1 << 16 {
		if got := ToF16(F16(uint16(h))); got != uint16(h) {
			t.Fatalf("pattern %#04x widens and narrows to %#04x", h, got)
		}
	}
	half := make([]float64, 0x7c00)
	for h := range half {
		half[h] = testkit.RefF16(uint16(h))
	}
	check := func(x float32) {
		t.Helper()
		if got, want := ToF16(x), refToF16(half, x); got != want {
			t.Fatalf("ToF16(%g = %#08x) = %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
	// The midpoints between neighbours (ties) and a float32 step either side of
	// them, where rounding decides, over every neighbouring pair.
	for h := range len(half) - 1 {
		m := float32((half[h] + half[h+1]) / 2) // 12 significant bits: exact
		for _, x := range []float32{m, math.Nextafter32(m, 0), math.Nextafter32(m, 1e9)} {
			check(x)
			check(-x)
		}
	}
	for _, x := range []float32{65504, 65519.99, 65520, 1e9, float32(math.Inf(1)), 0x1p-25, 0x1p-26, 3 * 0x1p-26, 1e-40} {
		check(x)
		check(-x)
	}
	// Any float32: random bit patterns, NaNs aside.
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		x := math.Float32frombits(r.Uint32())
		if x == x {
			check(x)
		}
	}
}
