package mxfp4

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestE2M1Table decodes every code from its bits (sign, two exponent bits
// with bias 1, one mantissa bit; exponent 0 is subnormal) and compares.
func TestE2M1Table(t *testing.T) {
	for code := range 16 {
		sign, exp, man := code>>3, (code>>1)&3, code&1
		var v float64
		if exp == 0 {
			v = float64(man) * 0.5
		} else {
			v = (1 + float64(man)/2) * math.Exp2(float64(exp-1))
		}
		if sign == 1 {
			v = -v
		}
		got := E2M1(byte(code))
		if math.Float32bits(got) != math.Float32bits(float32(v)) {
			t.Errorf("E2M1(%d) = %v, want %v", code, got, v)
		}
		if math.Float64bits(e2m1f64[code]) != math.Float64bits(v) {
			t.Errorf("e2m1f64[%d] = %v, want %v", code, e2m1f64[code], v)
		}
		if E2M1(byte(code|0xf0)) != got {
			t.Errorf("E2M1 uses bits above the nibble for code %#x", code|0xf0)
		}
	}
	if math.Float32bits(E2M1(8)) != 0x80000000 {
		t.Errorf("code 8 must be −0, got %#x", math.Float32bits(E2M1(8)))
	}
}

func TestScale(t *testing.T) {
	for s := range 256 {
		v, ok := Scale(byte(s))
		switch s {
		case 255:
			if ok || v != 0 {
				t.Errorf("Scale(255) = %v, %v; want 0, false", v, ok)
			}
		case 0:
			if !ok || math.Float32bits(v) != 0x00400000 {
				t.Errorf("Scale(0) = %#x, %v; want 0x00400000 (2^-127), true", math.Float32bits(v), ok)
			}
		default:
			if want := float32(math.Ldexp(1, s-127)); !ok || v != want {
				t.Errorf("Scale(%d) = %v, %v; want %v", s, v, ok, want)
			}
		}
		if s != 255 && scale64(byte(s)) != math.Ldexp(1, s-127) {
			t.Errorf("scale64(%d) = %v, want 2^%d", s, scale64(byte(s)), s-127)
		}
	}
}

func TestScanScales(t *testing.T) {
	st := ScanScales([]byte{0, 255, 127, 255, 254})
	if st != (Stats{Groups: 5, NaNScaleGroups: 2}) {
		t.Fatalf("ScanScales = %+v", st)
	}
	// Lengths around the vector count's blocks, 255 at random places.
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{31, 32, 33, 63, 64, 65, 1000, 4099} {
		b := make([]byte, n)
		want := 0
		for i := range b {
			b[i] = byte(rng.IntN(256))
			if rng.IntN(9) == 0 {
				b[i] = NaNScale
			}
			if b[i] == NaNScale {
				want++
			}
		}
		if got := ScanScales(b); got != (Stats{Groups: n, NaNScaleGroups: want}) {
			t.Fatalf("ScanScales of %d bytes = %+v, want %d NaN groups", n, got, want)
		}
	}
	st.Add(Stats{Groups: 3, NaNScaleGroups: 1})
	if st != (Stats{Groups: 8, NaNScaleGroups: 3}) {
		t.Fatalf("Add = %+v", st)
	}
}
