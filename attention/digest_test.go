package attention

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/parallel"
)

// digestRecords pins the output bits of KDA and MLA on random bf16 layers of
// awkward widths (SIMD blocks plus tails) over a prefill followed by decode
// steps. They were recorded from the original scalar implementation before
// the decode path was optimised; any optimisation must reproduce them on
// every build (default, purego, GOAMD64=v3) and worker count. A deliberate
// change of an evaluation order must update them.
var digestRecords = map[string]uint64{
	"kda":       0x1919ad86aea6889d,
	"kda state": 0x54bb742fc849a7d5,
	"mla":       0xd5bc691c6146b767,
	"mla cache": 0xaeb06c5a6a54b5b0,
}

func TestOutputDigests(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 78))
	const E, H, D, K, T = 80, 3, 24, 4, 21
	P := H * D
	kw := KDAWeights{Q: randBF16(t, r, P, E), K: randBF16(t, r, P, E), V: randBF16(t, r, P, E), G: randBF16(t, r, P, E),
		B: randBF16(t, r, H, E), FA: randBF16(t, r, D, E), FB: randBF16(t, r, P, D), O: randBF16(t, r, E, P),
		QConv: randF32(r, P*K, 0.5), KConv: randF32(r, P*K, 0.5), VConv: randF32(r, P*K, 0.5),
		ALog: randF32(r, D, 0.5), DtBias: randF32(r, P, 0.5), ONorm: randF32(r, D, 1)}
	const Hm, Rq, Rkv, dn, dr, dv = 3, 40, 52, 20, 9, 18
	mw := MLAWeights{QA: randBF16(t, r, Rq, E), QANorm: randF32(r, Rq, 1), QB: randBF16(t, r, Hm*(dn+dr), Rq),
		KVA: randBF16(t, r, Rkv+dr, E), KVANorm: randF32(r, Rkv, 1), KVB: randBF16(t, r, Hm*(dn+dv), Rkv),
		O: randBF16(t, r, E, Hm*dv), G: randBF16(t, r, Hm*dv, E)}
	x := randF32(r, T*E, 1)
	chunks := []int{9, 1, 1, 5, 1, 1, 1, 2}
	// These layers are too small for the heads to be split by default, so
	// the runs with minWork 1 force the split the large layers take.
	// The runs with a pool split on its helpers (a pool of 2 under 3 workers
	// caps the split at 2 chunks).
	for _, run := range []struct{ workers, minWork, pool int }{{1, parallel.MinWork, 0}, {2, parallel.MinWork, 0}, {3, parallel.MinWork, 0},
		{2, 1, 0}, {3, 1, 0}, {2, 1, 2}, {3, 1, 2}, {3, 1, 3}} {
		workers := run.workers
		pool := parallel.NewPool(run.pool)
		defer pool.Close()
		k, err := NewKDA(KDAConfig{Hidden: E, Heads: H, HeadDim: D, ConvK: K, GateLB: -5, RMSEps: 1e-5, Workers: workers, Pool: pool}, kw)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMLA(MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
			OutGate: true, RMSEps: 1e-5, Workers: workers, Pool: pool}, mw)
		if err != nil {
			t.Fatal(err)
		}
		k.minWork, m.minWork = run.minWork, run.minWork
		st, c := k.NewState(), m.NewCache()
		ko, mo := make([]float32, T*E), make([]float32, T*E)
		pos := 0
		for _, n := range chunks {
			if err := k.Forward(ko[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n, st); err != nil {
				t.Fatal(err)
			}
			if err := m.Forward(mo[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n, c); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		got := map[string]uint64{
			"kda": digest(ko), "kda state": digest(st.S, st.ConvQ, st.ConvK, st.ConvV),
			"mla": digest(mo), "mla cache": digest(c.KV),
		}
		for name, want := range digestRecords {
			if got[name] != want {
				t.Errorf("workers=%d minWork=%d pool=%d: %s digest %#x, recorded %#x", workers, run.minWork, run.pool, name, got[name], want)
			}
		}
	}
}

// CopyFrom restores a snapshot bit for bit into an existing cache, and
// refuses a cache of another shape.
func TestMLACacheCopyFrom(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const E, Hm, Rq, Rkv, dn, dr, dv = 24, 2, 16, 20, 8, 4, 8
	m, err := NewMLA(MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv, RMSEps: 1e-5},
		MLAWeights{QA: randBF16(t, r, Rq, E), QANorm: randF32(r, Rq, 1), QB: randBF16(t, r, Hm*(dn+dr), Rq),
			KVA: randBF16(t, r, Rkv+dr, E), KVANorm: randF32(r, Rkv, 1), KVB: randBF16(t, r, Hm*(dn+dv), Rkv),
			O: randBF16(t, r, E, Hm*dv)})
	if err != nil {
		t.Fatal(err)
	}
	x := randF32(r, 5*E, 1)
	c := m.NewCache()
	if err := m.Forward(make([]float32, 3*E), x[:3*E], 3, c); err != nil {
		t.Fatal(err)
	}
	snap := c.Clone()
	want := make([]float32, 2*E)
	if err := m.Forward(want, x[3*E:], 2, c); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyFrom(snap); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "restored cache", c.KV, snap.KV)
	got := make([]float32, 2*E)
	if err := m.Forward(got, x[3*E:], 2, c); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "replay after CopyFrom", got, want)
	if err := c.CopyFrom(&MLACache{KVLoRA: Rkv + 1, Rope: dr}); err == nil {
		t.Error("CopyFrom of a cache of another shape accepted")
	}
}
