package moe

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/mxfp4"
)

// digestRecords pins the output bits of a LatentMoE layer (MXFP4 experts,
// bf16 trunk, shared experts) and of the dense MLP, recorded from the
// original implementation before the decode path was optimised. Every build
// (default, purego, GOAMD64=v3), worker count and chunking must reproduce
// them. A deliberate change of an evaluation order must update them.
var digestRecords = map[string]uint64{
	"moe":   0x65f9e56093f66b7b,
	"dense": 0xd71edff48e45e9dc,
}

func TestOutputDigests(t *testing.T) {
	const E, L, I, NE, K, SI, T = 80, 64, 96, 7, 3, 72, 11
	rng := rand.New(rand.NewPCG(31, 32))
	randm := func(n int, s float64) []float32 { return testkit.Gaussian(rng, n, s) }
	bf16 := func(rows, cols int) quant.Matrix { return opfix.BF16(t, randm(rows*cols, 0.2), rows, cols) }
	mx := func(rows, cols int) quant.Matrix {
		p, s, err := mxfp4.Quantize(randm(rows*cols, 0.2), rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		m, err := quant.NewMXFP4(rows, cols, p, s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	experts := make([]Expert, NE)
	for e := range experts {
		experts[e] = Expert{W1: mx(I, L), W3: mx(I, L), W2: mx(L, I)}
	}
	w := Weights{Gate: bf16(NE, E), Bias: randm(NE, 0.05), Down: bf16(L, E), Up: bf16(E, L), Norm: randm(L, 1),
		SharedGate: bf16(SI, E), SharedUp: bf16(SI, E), SharedDown: bf16(E, SI)}
	dg, du, dd := bf16(SI, E), bf16(SI, E), bf16(E, SI)
	x := randm(T*E, 1)
	chunks := []int{6, 1, 1, 3}
	// The experts are too small to be split by default, so the runs with
	// minWork 1 force the split the large layers take.
	// The runs with a pool split on its helpers (a pool of 2 under 3 workers
	// caps the split at 2 chunks).
	for _, run := range []struct{ workers, minWork, pool int }{{1, parallel.MinWork, 0}, {2, parallel.MinWork, 0}, {3, parallel.MinWork, 0},
		{2, 1, 0}, {3, 1, 0}, {2, 1, 2}, {3, 1, 2}, {3, 1, 3}} {
		workers := run.workers
		pool := parallel.NewPool(run.pool)
		defer pool.Close()
		m, err := New(Config{Layer: 2, Hidden: E, Latent: L, Inter: I, TopK: K, RoutedScale: 2.5, Renorm: true,
			LatentNorm: true, Beta1: 4, Beta2: 25, RMSEps: 1e-5, Workers: workers, Pool: pool}, w, NewMemExperts(map[int][]Expert{2: experts}))
		if err != nil {
			t.Fatal(err)
		}
		m.minWork = run.minWork
		d, err := NewDensePool(dg, du, dd, 4, 25, workers, pool)
		if err != nil {
			t.Fatal(err)
		}
		mo, do := make([]float32, T*E), make([]float32, T*E)
		pos := 0
		for _, n := range chunks {
			if err := m.Forward(mo[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n); err != nil {
				t.Fatal(err)
			}
			if err := d.Forward(do[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		got := map[string]uint64{"moe": testkit.Digest(mo), "dense": testkit.Digest(do)}
		for name, want := range digestRecords {
			if got[name] != want {
				t.Errorf("workers=%d minWork=%d pool=%d: %s digest %#x, recorded %#x", workers, run.minWork, run.pool, name, got[name], want)
			}
		}
	}
}

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
		return opfix.Matrix(t, testkit.Gaussian(r, rows*cols, 0.2), rows, cols)
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
	x, out, ids := testkit.Gaussian(r, E, 1), make([]float32, E), make([]int, K)
	ws := NewWorkspace()
	if err := m.ForwardRoutedWith(out, x, 1, ids, ws); err != nil {
		t.Fatal(err)
	}
	testkit.NoAllocs(t, "MoE decode step", 20, func() { _ = m.ForwardRoutedWith(out, x, 1, ids, ws) })
	testkit.NoAllocs(t, "dense decode step", 20, func() { _ = d.ForwardWith(out, x, 1, ws) })
}
