package attention

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The axpy kernels (assembly on amd64) must match the pure-Go loops bit for
// bit, for every length (vector body plus tail) and for special values.
func TestAxpyKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-30}
	val := func() float32 {
		if r.IntN(16) == 0 {
			return special[r.IntN(len(special))]
		}
		return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(40)-20)))
	}
	for n := 0; n <= 45; n++ {
		for trial := range 20 {
			xs := make([][]float32, 4)
			for j := range xs {
				xs[j] = make([]float32, n)
				for i := range xs[j] {
					xs[j][i] = val()
				}
			}
			a := []float64{float64(val()), float64(val()), float64(val()), float64(val())}
			acc0 := make([]float64, n)
			for i := range acc0 {
				acc0[i] = float64(val()) * float64(val())
			}
			got, want := append([]float64(nil), acc0...), append([]float64(nil), acc0...)
			axpy4(got, a, xs[0], xs[1], xs[2], xs[3])
			axpy4Go(want, a, xs[0], xs[1], xs[2], xs[3])
			compare64(t, "axpy4", n, trial, got, want)
			got, want = append(got[:0], acc0...), append(want[:0], acc0...)
			axpy1(got, a[1], xs[2])
			axpy1Go(want, a[1], xs[2])
			compare64(t, "axpy1", n, trial, got, want)
			// axpy4Go is four sequential axpy1Go passes.
			got, want = append(got[:0], acc0...), append(want[:0], acc0...)
			axpy4Go(got, a, xs[0], xs[1], xs[2], xs[3])
			for j := range 4 {
				axpy1Go(want, a[j], xs[j])
			}
			compare64(t, "axpy4Go vs 4×axpy1Go", n, trial, got, want)
		}
	}
}

func compare64(t *testing.T, what string, n, trial int, got, want []float64) {
	t.Helper()
	for i := range got {
		g, w := got[i], want[i]
		if math.Float64bits(g) != math.Float64bits(w) && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Fatalf("%s n=%d trial=%d [%d]: %v, want %v", what, n, trial, i, g, w)
		}
	}
}
