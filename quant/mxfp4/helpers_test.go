package mxfp4

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// refDot is an independent RG dot product over already dequantised float32
// weights (w = E2M1·scale): per 32-group, eight lanes j mod 8 summed from +0
// in ascending j, the fixed tree, then acc += sub. Because every scale is a
// power of two and float64 has the range, Σ(E·s·x) rounds exactly like
// s·Σ(E·x), so this must equal the kernels bit for bit. Groups flagged in
// dead (scale 255) are skipped.
func refDot(w []float32, x []float32, dead func(g int) bool) float32 {
	acc := 0.0
	for g := 0; g*32 < len(x); g++ {
		if dead != nil && dead(g) {
			continue
		}
		var l [8]float64
		for j := range 32 {
			l[j%8] += float64(w[g*32+j]) * float64(x[g*32+j])
		}
		acc += ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
	}
	return float32(acc)
}

// randMatrix returns random packed and scale bytes whose scales come from
// [lo, hi] with occasional 0 and 255 when specials is set.
func randMatrix(rng *rand.Rand, rows, cols int, lo, hi int, specials bool) (packed, scales []byte) {
	packed = make([]byte, rows*cols/2)
	scales = make([]byte, rows*cols/32)
	for i := range packed {
		packed[i] = byte(rng.IntN(256))
	}
	for i := range scales {
		scales[i] = byte(lo + rng.IntN(hi-lo+1))
		if specials {
			switch rng.IntN(8) {
			case 0:
				scales[i] = 0
			case 1:
				scales[i] = 255
			}
		}
	}
	return packed, scales
}

// randVecWild draws activations whose magnitudes span 2^−40..2^40, so that
// float64 partial sums absorb or cancel each other and any change of lane
// partition or summation order shows up in the float32 result.
func randVecWild(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Ldexp(1+rng.Float64(), rng.IntN(81)-40))
		if rng.IntN(2) == 0 {
			x[i] = -x[i]
		}
	}
	return x
}

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(21)-10)))
	}
	return x
}

// refMatVec is refDot over each of the rows of w.
func refMatVec(w, x []float32, rows int) []float32 {
	cols := len(x)
	want := make([]float32, rows)
	for r := range rows {
		want[r] = refDot(w[r*cols:(r+1)*cols], x, nil)
	}
	return want
}

// requireKernels runs every kernel over the packed matrix and requires each
// to give want bit for bit (any NaN equals any NaN).
func requireKernels(t *testing.T, packed, scales []byte, x, want []float32) {
	t.Helper()
	for name, k := range kernels() {
		got := make([]float32, len(want))
		runMatVec(k, got, packed, scales, x)
		testkit.RequireSameBitsOrNaN(t, name, got, want)
	}
}

// kernels returns the implementations that can run here, by name.
func kernels() map[string]kernel {
	ks := map[string]kernel{"generic": genericKernel}
	for name, k := range asmKernels() {
		ks[name] = k
	}
	return ks
}

func runMatVec(k kernel, dst []float32, packed, scales []byte, x []float32) Stats {
	return matVec(k, dst, packed, scales, k.widen(nil, x))
}
