package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// TestNarrowEveryPattern checks that every bfloat16 and binary16 value, NaNs, infinities and
// subnormals included, narrows back to its own pattern and costs 2 bytes.
func TestNarrowEveryPattern(t *testing.T) {
	for _, half := range []bool{false, true} {
		v := make([]float32, 1<<16)
		for h := range v {
			if half {
				v[h] = floatbits.F16(uint16(h))
			} else {
				v[h] = floatbits.BF16(uint16(h))
			}
		}
		n, ok := Narrow(v, half)
		if !ok {
			t.Fatalf("half=%v: Narrow refused values widened from the format", half)
		}
		if n.Bytes() != 2*int64(len(v)) || n.Len() != len(v) {
			t.Fatalf("half=%v: Len %d Bytes %d, want %d and %d", half, n.Len(), n.Bytes(), len(v), 2*len(v))
		}
		for h, x := range n.Float32() {
			if math.Float32bits(x) != math.Float32bits(v[h]) {
				t.Fatalf("half=%v: pattern %#04x widens back to %#08x, want %#08x", half, h, math.Float32bits(x), math.Float32bits(v[h]))
			}
		}
	}
}

// TestNarrowRefusesWider checks that values the format cannot hold stay float32.
func TestNarrowRefusesWider(t *testing.T) {
	for _, tc := range []struct {
		x    float32
		half bool
	}{
		{1 + 1.0/(1<<20), false}, {1 + 1.0/(1<<20), true}, // mantissa beyond 7 or 10 bits
		{1e5, true}, {1e-9, true}, {0x1p-25, true}, // beyond binary16's range
	} {
		v, ok := Narrow([]float32{1, tc.x}, tc.half)
		if ok || v.Bytes() != 8 {
			t.Errorf("Narrow(%g, half=%v) = ok %v, %d bytes; want float32 kept", tc.x, tc.half, ok, v.Bytes())
		}
	}
}

// TestNarrowRMSNormSameBits checks RMSNorm and RMSNormRows with a narrow gain against the
// same gain widened into float32.
func TestNarrowRMSNormSameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const e, rows = 37, 7
	x := make([]float32, e*rows)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, half := range []bool{false, true} {
		w := make([]float32, e)
		for i := range w {
			h := uint16(r.Uint32())
			if half {
				w[i] = floatbits.F16(h&0x7bff | 0x3000) // finite, near 1
			} else {
				w[i] = floatbits.BF16(h&0x3fff | 0x3f00) // finite, near 1
			}
		}
		n, ok := Narrow(w, half)
		if !ok {
			t.Fatalf("half=%v: Narrow refused widened values", half)
		}
		want, got := make([]float32, len(x)), make([]float32, len(x))
		RMSNormRows(want, x, w, 1e-5)
		n.RMSNormRows(got, x, 1e-5)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("half=%v: element %d is %g, want %g", half, i, got[i], want[i])
			}
		}
	}
}

// TestNarrowest: values widened from bfloat16 are held as bfloat16, values only binary16 can hold
// as binary16 (2 bytes each either way), and values neither can hold as float32, unchanged.
func TestNarrowest(t *testing.T) {
	bf := []float32{floatbits.BF16(0x3f80), floatbits.BF16(0xc2f7), floatbits.BF16(0x0001)}
	f16 := []float32{floatbits.F16(0x3c01), floatbits.F16(0x0001)} // more mantissa than bf16 has
	wide := []float32{1, math.Nextafter32(1, 2)}
	for _, c := range []struct {
		name  string
		v     []float32
		bytes int64
	}{{"bf16", bf, 2}, {"f16", f16, 2}, {"f32", wide, 4}} {
		n := Narrowest(c.v)
		if got := n.Bytes(); got != c.bytes*int64(len(c.v)) {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.bytes*int64(len(c.v)))
		}
		for i, x := range n.Float32() {
			if math.Float32bits(x) != math.Float32bits(c.v[i]) {
				t.Errorf("%s[%d]: %v held as %v", c.name, i, c.v[i], x)
			}
		}
	}
}
