package moe

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/parallel"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/quant"
)

// With a reused Workspace a decode step allocates nothing in this package,
// on one worker and with the experts and the activation split on a pool
// (quant's f32 matrices and MemExperts, which fills the workspace's expert
// slice, allocate nothing either).
func TestDecodeStepAllocations(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	testkit.OnPools(t, decodeStepAllocations)
}

func decodeStepAllocations(t *testing.T, workers int, pool *parallel.Pool) {
	r := rand.New(rand.NewPCG(3, 4))
	nm := func(rows, cols int) quant.Matrix {
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32(r.NormFloat64() * 0.2)
		}
		return opfix.Matrix(t, w, rows, cols)
	}
	const E, L, I, NE, K, SI = 32, 16, 24, 6, 2, 2048 // SI: the activation splits
	var all []Expert
	for range NE {
		all = append(all, Expert{W1: nm(I, L), W3: nm(I, L), W2: nm(L, I)})
	}
	src := NewMemExperts(map[int][]Expert{1: all})
	m, err := New(Config{Layer: 1, Hidden: E, Latent: L, Inter: I, TopK: K, RoutedScale: 1, Renorm: true,
		LatentNorm: true, Beta1: 4, Beta2: 25, RMSEps: 1e-5, Workers: workers, Pool: pool},
		Weights{Gate: nm(NE, E), Down: nm(L, E), Up: nm(E, L), Norm: make([]float32, L),
			SharedGate: nm(SI, E), SharedUp: nm(SI, E), SharedDown: nm(E, SI)}, src)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDensePool(nm(SI, E), nm(SI, E), nm(E, SI), 4, 25, workers, pool)
	if err != nil {
		t.Fatal(err)
	}
	if pool != nil {
		m.minWork = 1 // split the experts even on this small layer
	}
	x, out, ids := make([]float32, E), make([]float32, E), make([]int, K)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	ws := NewWorkspace()
	if err := m.ForwardRoutedWith(out, x, 1, ids, ws); err != nil {
		t.Fatal(err)
	}
	testkit.NoAllocs(t, "MoE decode step", 20, func() { _ = m.ForwardRoutedWith(out, x, 1, ids, ws) })
	testkit.NoAllocs(t, "dense decode step", 20, func() { _ = d.ForwardWith(out, x, 1, ws) })
}
