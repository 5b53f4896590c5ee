package attention

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/parallel"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
)

// With a reused Workspace a decode step allocates nothing in this package,
// on one worker and with the heads split on a pool (quant's f32 matrices
// allocate nothing either, so the count covers the whole decode path down
// to the kernels).
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
	nm := func(rows, cols int) quant.Matrix { return f32Mat(t, rows, cols, randF32(r, rows*cols, 0.2)) }
	const E, H, D, K = 32, 2, 16, 4
	P := H * D
	k, err := NewKDA(KDAConfig{Hidden: E, Heads: H, HeadDim: D, ConvK: K, GateLB: -5, RMSEps: 1e-5, Workers: workers, Pool: pool},
		KDAWeights{Q: nm(P, E), K: nm(P, E), V: nm(P, E), G: nm(P, E), B: nm(H, E), FA: nm(D, E), FB: nm(P, D), O: nm(E, P),
			QConv: randF32(r, P*K, 0.5), KConv: randF32(r, P*K, 0.5), VConv: randF32(r, P*K, 0.5),
			ALog: randF32(r, H, 0.5), DtBias: randF32(r, P, 0.5), ONorm: randF32(r, D, 1)})
	if err != nil {
		t.Fatal(err)
	}
	const Hm, Rq, Rkv, dn, dr, dv = 2, 16, 20, 8, 4, 8
	m, err := NewMLA(MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
		OutGate: true, RMSEps: 1e-5, Workers: workers, Pool: pool},
		MLAWeights{QA: nm(Rq, E), QANorm: randF32(r, Rq, 1), QB: nm(Hm*(dn+dr), Rq), KVA: nm(Rkv+dr, E),
			KVANorm: randF32(r, Rkv, 1), KVB: nm(Hm*(dn+dv), Rkv), O: nm(E, Hm*dv), G: nm(Hm*dv, E)})
	if err != nil {
		t.Fatal(err)
	}
	if pool != nil {
		k.minWork, m.minWork = 1, 1 // split heads even on these small layers
	}
	x, out := randF32(r, E, 1), make([]float32, E)
	ws, st, c := NewWorkspace(), k.NewState(), m.NewCache()
	c.KV = make([]float32, 0, 64*(Rkv+dr))
	for range 10 { // a short prompt, and the workspace grown
		if err := k.ForwardWith(out, x, 1, st, ws); err != nil {
			t.Fatal(err)
		}
		if err := m.ForwardWith(out, x, 1, c, ws); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(20, func() {
		_ = k.ForwardWith(out, x, 1, st, ws)
	}); n != 0 {
		t.Errorf("KDA decode step: %v allocations", n)
	}
	if n := testing.AllocsPerRun(20, func() {
		_ = m.ForwardWith(out, x, 1, c, ws)
		_ = c.Truncate(10)
	}); n != 0 {
		t.Errorf("MLA decode step: %v allocations", n)
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
