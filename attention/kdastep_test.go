package attention

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The recurrence row kernels (assembly on amd64) must match the float32 Go
// loops bit for bit, for every length and for special values (NaN payloads
// aside), including subnormals.
func TestKDARowKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-39, -3e-40}
	val := func() float32 {
		if r.IntN(12) == 0 {
			return special[r.IntN(len(special))]
		}
		return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(60)-30)))
	}
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = val()
		}
		return v
	}
	same := func(what string, n int, got, want []float32) {
		t.Helper()
		for i := range got {
			g, w := got[i], want[i]
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Fatalf("%s n=%d [%d]: %v, want %v", what, n, i, g, w)
			}
		}
	}
	for n := 0; n <= 41; n++ {
		for range 30 {
			row, u, o, e := vec(n), vec(n), vec(n), vec(n)
			a, k := val(), val()
			r1, u1 := append([]float32(nil), row...), append([]float32(nil), u...)
			r2, u2 := append([]float32(nil), row...), append([]float32(nil), u...)
			decayRead(r1, u1, a, k)
			decayReadGo(r2, u2, a, k)
			same("decayRead row", n, r1, r2)
			same("decayRead u", n, u1, u2)
			r1, o1 := append(r1[:0], row...), append([]float32(nil), o...)
			r2, o2 := append(r2[:0], row...), append([]float32(nil), o...)
			writeOut(r1, o1, e, a, k)
			writeOutGo(r2, o2, e, a, k)
			same("writeOut row", n, r1, r2)
			same("writeOut o", n, o1, o2)
		}
	}
}
