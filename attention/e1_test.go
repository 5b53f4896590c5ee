package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/quant"
)

func randF32(r *rand.Rand, n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * s)
	}
	return v
}

func randBF16(t testing.TB, r *rand.Rand, rows, cols int) quant.Matrix {
	data, _, err := quant.Quantize(quant.BF16, randF32(r, rows*cols, 0.15), rows, cols, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := quant.NewBF16(rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randomSplit cuts n positions into random consecutive chunks.
func randomSplit(r *rand.Rand, n int) []int {
	var out []int
	for n > 0 {
		c := 1 + r.IntN(min(n, 7))
		out = append(out, c)
		n -= c
	}
	return out
}

// E1 on longer sequences with bf16 weights: one call ≡ random chunkings ≡
// worker counts, for KDA (outputs and state) and MLA (outputs and cache).
func TestE1RandomChunkings(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const E, H, D, K, T = 48, 3, 8, 4, 40
	P := H * D
	kw := KDAWeights{Q: randBF16(t, r, P, E), K: randBF16(t, r, P, E), V: randBF16(t, r, P, E), G: randBF16(t, r, P, E),
		B: randBF16(t, r, H, E), FA: randBF16(t, r, D, E), FB: randBF16(t, r, P, D), O: randBF16(t, r, E, P),
		QConv: randF32(r, P*K, 0.5), KConv: randF32(r, P*K, 0.5), VConv: randF32(r, P*K, 0.5),
		ALog: randF32(r, D, 0.5), DtBias: randF32(r, P, 0.5), ONorm: randF32(r, D, 1)}
	const Hm, Rq, Rkv, dn, dr, dv = 3, 16, 16, 8, 4, 8
	mw := MLAWeights{QA: randBF16(t, r, Rq, E), QANorm: randF32(r, Rq, 1), QB: randBF16(t, r, Hm*(dn+dr), Rq),
		KVA: randBF16(t, r, Rkv+dr, E), KVANorm: randF32(r, Rkv, 1), KVB: randBF16(t, r, Hm*(dn+dv), Rkv),
		O: randBF16(t, r, E, Hm*dv), G: randBF16(t, r, Hm*dv, E)}
	x := randF32(r, T*E, 1)

	runKDA := func(workers int, chunks []int) ([]float32, *KDAState) {
		k, err := NewKDA(KDAConfig{Hidden: E, Heads: H, HeadDim: D, ConvK: K, GateLB: -5, RMSEps: 1e-5, Workers: workers}, kw)
		if err != nil {
			t.Fatal(err)
		}
		st, out, pos := k.NewState(), make([]float32, T*E), 0
		for _, n := range chunks {
			if err := k.Forward(out[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n, st); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		return out, st
	}
	runMLA := func(workers int, chunks []int) ([]float32, *MLACache) {
		m, err := NewMLA(MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
			OutGate: true, RMSEps: 1e-5, Workers: workers}, mw)
		if err != nil {
			t.Fatal(err)
		}
		c, out, pos := m.NewCache(), make([]float32, T*E), 0
		for _, n := range chunks {
			if err := m.Forward(out[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n, c); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		return out, c
	}
	kRef, kSt := runKDA(1, []int{T})
	mRef, mC := runMLA(1, []int{T})
	ones := make([]int, T)
	for i := range ones {
		ones[i] = 1
	}
	splits := [][]int{ones}
	for range 4 {
		splits = append(splits, randomSplit(r, T))
	}
	for i, sp := range splits {
		w := 1 + i%3
		t.Run(fmt.Sprintf("workers=%d/%v", w, sp), func(t *testing.T) {
			out, st := runKDA(w, sp)
			sameBits(t, "kda out", out, kRef)
			sameBits(t, "kda state", append(append(append(st.S, st.ConvQ...), st.ConvK...), st.ConvV...),
				append(append(append(kSt.S, kSt.ConvQ...), kSt.ConvK...), kSt.ConvV...))
			mo, c := runMLA(w, sp)
			sameBits(t, "mla out", mo, mRef)
			sameBits(t, "mla cache", c.KV, mC.KV)
		})
	}
}

func TestBindErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	good := KDAWeights{Q: randBF16(t, r, 8, 4), K: randBF16(t, r, 8, 4), V: randBF16(t, r, 8, 4), G: randBF16(t, r, 8, 4),
		B: randBF16(t, r, 2, 4), FA: randBF16(t, r, 4, 4), FB: randBF16(t, r, 8, 4), O: randBF16(t, r, 4, 8),
		QConv: make([]float32, 16), KConv: make([]float32, 16), VConv: make([]float32, 16),
		ALog: make([]float32, 4), DtBias: make([]float32, 8), ONorm: make([]float32, 4)}
	cfg := KDAConfig{Hidden: 4, Heads: 2, HeadDim: 4, ConvK: 2, GateLB: -5, RMSEps: 1e-5}
	if _, err := NewKDA(cfg, good); err != nil {
		t.Fatalf("valid KDA refused: %v", err)
	}
	for name, mutate := range map[string]func(*KDAWeights, *KDAConfig){
		"o_proj transposed": func(w *KDAWeights, _ *KDAConfig) { w.O = randBF16(t, r, 8, 4) },
		"missing g_proj":    func(w *KDAWeights, _ *KDAConfig) { w.G = nil },
		"short A_log":       func(w *KDAWeights, _ *KDAConfig) { w.ALog = w.ALog[:1] },
		"short conv taps":   func(w *KDAWeights, _ *KDAConfig) { w.KConv = w.KConv[:15] },
		"short dt_bias":     func(w *KDAWeights, _ *KDAConfig) { w.DtBias = w.DtBias[:7] },
		"positive bound":    func(_ *KDAWeights, c *KDAConfig) { c.GateLB = 1 },
		"zero eps":          func(_ *KDAWeights, c *KDAConfig) { c.RMSEps = 0 },
	} {
		w, c := good, cfg
		mutate(&w, &c)
		if _, err := NewKDA(c, w); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
