package attention

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
)

// With a reused Workspace a decode step allocates nothing in this package,
// on one worker and with the heads split on a pool (quant's f32 matrices
// allocate nothing either, so the count covers the whole decode path down
// to the kernels).
func TestDecodeStepAllocations(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	testkit.OnPools(t, decodeStepAllocations)
}

func decodeStepAllocations(t *testing.T, workers int, pool *parallel.Pool) {
	r := rand.New(rand.NewPCG(3, 4))
	nm := f32s(t, r, 0.2)
	const E, H, D, K = 32, 2, 16, 4
	kc := KDAConfig{Hidden: E, Heads: H, HeadDim: D, ConvK: K, GateLB: -5, RMSEps: 1e-5, Workers: workers, Pool: pool}
	k, err := NewKDA(kc, kdaWeights(r, kc, H, nm))
	if err != nil {
		t.Fatal(err)
	}
	const Hm, Rq, Rkv, dn, dr, dv = 2, 16, 20, 8, 4, 8
	mc := MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
		OutGate: true, RMSEps: 1e-5, Workers: workers, Pool: pool}
	m, err := NewMLA(mc, mlaWeights(r, mc, nm))
	if err != nil {
		t.Fatal(err)
	}
	if pool != nil {
		k.minWork, m.minWork = 1, 1 // split heads even on these small layers
	}
	x, out := testkit.Gaussian(r, E, 1), make([]float32, E)
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
	testkit.NoAllocs(t, "KDA decode step", 20, func() { _ = k.ForwardWith(out, x, 1, st, ws) })
	testkit.NoAllocs(t, "MLA decode step", 20, func() {
		_ = m.ForwardWith(out, x, 1, c, ws)
		_ = c.Truncate(10)
	})
}
