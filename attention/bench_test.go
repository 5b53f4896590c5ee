package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/quant"
)

// benchWeights builds random bf16 matrices and counts their bytes, so each
// benchmark can be compared with testkit.ReadLoop over the same volume
// (decode is weight-streaming bound: the ratio says how close to memory
// speed a step runs).
type benchWeights struct {
	rng   *rand.Rand
	bytes int
}

func (b *benchWeights) bf16(tb testing.TB, rows, cols int) quant.Matrix {
	b.bytes += 2 * rows * cols
	return opfix.BF16(tb, testkit.Gaussian(b.rng, rows*cols, 0.05), rows, cols)
}

// mla draws bf16 weights (and unit-scale norms) of c's shapes, with the
// output gate.
func (b *benchWeights) mla(tb testing.TB, c MLAConfig) MLAWeights {
	return mlaWeights(b.rng, c, func(rows, cols int) quant.Matrix { return b.bf16(tb, rows, cols) })
}

// The benchmarks use the synthetic `perf` geometry (checkpoint.Synthesize): hidden
// 2048, KDA 16×128 with kernel 4, MLA 16 heads, q_lora 512, kv_lora 256,
// nope 128, rope 64, v 128; bf16 weights.

func BenchmarkKDAStep(b *testing.B) {
	const E, H, D, K = 2048, 16, 128, 4
	P := H * D
	bw := &benchWeights{rng: rand.New(rand.NewPCG(1, 1))}
	w := KDAWeights{Q: bw.bf16(b, P, E), K: bw.bf16(b, P, E), V: bw.bf16(b, P, E), G: bw.bf16(b, P, E),
		B: bw.bf16(b, H, E), FA: bw.bf16(b, D, E), FB: bw.bf16(b, P, D), O: bw.bf16(b, E, P),
		QConv: testkit.Gaussian(bw.rng, P*K, 0.3), KConv: testkit.Gaussian(bw.rng, P*K, 0.3), VConv: testkit.Gaussian(bw.rng, P*K, 0.3),
		ALog: testkit.Gaussian(bw.rng, H, 0.5), DtBias: testkit.Gaussian(bw.rng, P, 0.5), ONorm: testkit.Gaussian(bw.rng, D, 1)}
	b.Run("readloop", func(b *testing.B) { testkit.ReadLoop(b, make([]byte, bw.bytes)) })
	for _, T := range []int{1, 32} {
		x := testkit.Gaussian(bw.rng, T*E, 1)
		out := make([]float32, T*E)
		for _, workers := range []int{1, 2} {
			k, err := NewKDA(KDAConfig{Hidden: E, Heads: H, HeadDim: D, ConvK: K, GateLB: -5, RMSEps: 1e-5, Workers: workers}, w)
			if err != nil {
				b.Fatal(err)
			}
			st := k.NewState()
			b.Run(fmt.Sprintf("T=%d/workers=%d", T, workers), func(b *testing.B) {
				b.SetBytes(int64(bw.bytes))
				b.ReportAllocs()
				for b.Loop() {
					if err := k.Forward(out, x, T, st); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkMLAStep(b *testing.B) {
	const E, Hm, Rq, Rkv, dn, dr, dv, ctx = 2048, 16, 512, 256, 128, 64, 128, 512
	bw := &benchWeights{rng: rand.New(rand.NewPCG(2, 2))}
	cfg := MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
		OutGate: true, RMSEps: 1e-5}
	w := bw.mla(b, cfg)
	// A cache of ctx positions filled directly (a normalised latent has
	// entries of order one), so setup does not cost a long prefill.
	prefix := testkit.Gaussian(bw.rng, ctx*(Rkv+dr), 1)
	b.Run("readloop", func(b *testing.B) { testkit.ReadLoop(b, make([]byte, bw.bytes)) })
	for _, T := range []int{1, 32} {
		x := testkit.Gaussian(bw.rng, T*E, 1)
		out := make([]float32, T*E)
		for _, workers := range []int{1, 2} {
			cfg.Workers = workers
			m, err := NewMLA(cfg, w)
			if err != nil {
				b.Fatal(err)
			}
			c := m.NewCache()
			c.KV = append(make([]float32, 0, (ctx+T)*(Rkv+dr)), prefix...)
			b.Run(fmt.Sprintf("ctx=%d/T=%d/workers=%d", ctx, T, workers), func(b *testing.B) {
				b.SetBytes(int64(bw.bytes))
				b.ReportAllocs()
				for b.Loop() {
					if err := m.Forward(out, x, T, c); err != nil {
						b.Fatal(err)
					}
					_ = c.Truncate(ctx) // keep the context length fixed
				}
			})
		}
	}
}

// BenchmarkKDARecurrence is one head's recurrence over a 256-position
// prefill (D = 128): "fused" is kdaSteps (one pass over the state per
// position), "two-pass" the same positions through kdaStep, in one run.
func BenchmarkKDARecurrence(b *testing.B) {
	const T, D = 256, 128
	bw := &benchWeights{rng: rand.New(rand.NewPCG(2, 2))}
	q, k, v := testkit.Gaussian(bw.rng, T*D, 0.1), testkit.Gaussian(bw.rng, T*D, 0.1), testkit.Gaussian(bw.rng, T*D, 1)
	alpha, beta := testkit.Gaussian(bw.rng, T*D, 0.01), testkit.Gaussian(bw.rng, T, 0.1)
	for i := range alpha {
		alpha[i] = 0.99 - alpha[i]*alpha[i]
	}
	S, o, u, e := make([]float32, D*D), make([]float32, T*D), make([]float32, D), make([]float32, D)
	b.Run("fused", func(b *testing.B) {
		b.SetBytes(T * D * D * 4)
		for b.Loop() {
			kdaSteps(S, q, k, v, alpha, beta, o, u, e, T, 0, 1)
		}
	})
	b.Run("two-pass", func(b *testing.B) {
		b.SetBytes(T * D * D * 4)
		for b.Loop() {
			for t := range T {
				kdaStep(S, q[t*D:t*D+D], k[t*D:t*D+D], v[t*D:t*D+D], alpha[t*D:t*D+D], beta[t], o[t*D:t*D+D], u)
			}
		}
	})
}
