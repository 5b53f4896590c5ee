package moe

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/parallel"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
)

// With a reused Workspace a decode step allocates nothing in this package,
// on one worker and with the experts and the activation split on a pool
// (quant's f32 matrices and MemExperts, which fills the workspace's expert
// slice, allocate nothing either).
func TestDecodeStepAllocations(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	pool := parallel.NewPool(2)
	defer pool.Close()
	for _, run := range []struct {
		name    string
		workers int
		pool    *parallel.Pool
	}{{"one worker", 1, nil}, {"split on a pool", 2, pool}} {
		t.Run(run.name, func(t *testing.T) { decodeStepAllocations(t, run.workers, run.pool) })
	}
}

func decodeStepAllocations(t *testing.T, workers int, pool *parallel.Pool) {
	r := rand.New(rand.NewPCG(3, 4))
	nm := func(rows, cols int) quant.Matrix {
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32(r.NormFloat64() * 0.2)
		}
		return f32Mat(t, rows, cols, w)
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
	if n := testing.AllocsPerRun(20, func() { _ = m.ForwardRoutedWith(out, x, 1, ids, ws) }); n != 0 {
		t.Errorf("MoE decode step: %v allocations", n)
	}
	if n := testing.AllocsPerRun(20, func() { _ = d.ForwardWith(out, x, 1, ws) }); n != 0 {
		t.Errorf("dense decode step: %v allocations", n)
	}
}

func f32Mat(t *testing.T, rows, cols int, w []float32) quant.Matrix {
	t.Helper()
	m, err := quant.F32FromFloats(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
