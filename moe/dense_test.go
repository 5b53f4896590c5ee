package moe

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
)

func TestDenseMatchesFloat64Reference(t *testing.T) {
	const E, I, T = 32, 48, 3
	rng := rand.New(rand.NewPCG(1, 2))
	randv := func(n int, s float64) []float32 { return testkit.Gaussian(rng, n, s) }
	wg, wu, wd := randv(I*E, 0.5), randv(I*E, 0.5), randv(E*I, 0.3)
	d, err := NewDense(opfix.Matrix(t, wg, I, E), opfix.Matrix(t, wu, I, E), opfix.Matrix(t, wd, E, I), 4, 25, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := randv(T*E, 2)
	out := make([]float32, T*E)
	if err := d.Forward(out, x, T); err != nil {
		t.Fatal(err)
	}
	for tt := range T {
		h := make([]float64, I)
		for i := range I {
			var g, u float64
			for j := range E {
				g += float64(wg[i*E+j]) * float64(x[tt*E+j])
				u += float64(wu[i*E+j]) * float64(x[tt*E+j])
			}
			h[i] = 4 * math.Tanh(g/4) / (1 + math.Exp(-g)) * 25 * math.Tanh(u/25)
		}
		for o := range E {
			var s float64
			for i := range I {
				s += float64(wd[o*I+i]) * h[i]
			}
			if got := float64(out[tt*E+o]); math.Abs(got-s) > 1e-5+1e-4*math.Abs(s) {
				t.Fatalf("out[%d][%d] = %v, float64 reference %v", tt, o, got, s)
			}
		}
	}
	if _, err := NewDense(opfix.Matrix(t, wg, I, E), opfix.Matrix(t, wu, I, E), opfix.Matrix(t, wg, I, E), 4, 25, 1); err == nil {
		t.Error("mis-shaped down accepted")
	}
}
