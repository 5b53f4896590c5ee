package moe

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
)

// BenchmarkMoEStep times positions through a LatentMoE layer of the
// synthetic `perf` geometry (hidden 2048, 64 experts top-8, latent 1024,
// expert inter 512, two fused shared experts) with MXFP4 experts (the
// checkpoint's format) and bf16 trunk matrices. For T = 1 it reports the
// bytes of weights one step reads, so its MB/s compares directly with
// testkit.ReadLoop over the same volume.
func BenchmarkMoEStep(b *testing.B) {
	const E, L, I, NE, K, SI = 2048, 1024, 512, 64, 8, 1024
	rng := rand.New(rand.NewPCG(9, 9))
	randv := func(n int) []float32 { return testkit.Gaussian(rng, n, 0.05) }
	bytesPerStep := 0
	bf16 := func(rows, cols int) quant.Matrix {
		data, _, err := quant.Quantize(quant.BF16, randv(rows*cols), rows, cols, 0)
		if err != nil {
			b.Fatal(err)
		}
		m, err := quant.NewBF16(rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		bytesPerStep += len(data)
		return m
	}
	var expertBytes int
	mx := func(rows, cols int) quant.Matrix {
		w, s, err := quant.Quantize(quant.MXFP4, randv(rows*cols), rows, cols, 0)
		if err != nil {
			b.Fatal(err)
		}
		m, err := quant.NewMXFP4(rows, cols, w, s)
		if err != nil {
			b.Fatal(err)
		}
		expertBytes = len(w) + len(s)
		return m
	}
	experts := make([]Expert, NE)
	for e := range experts {
		experts[e] = Expert{W1: mx(I, L), W3: mx(I, L), W2: mx(L, I)}
	}
	w := Weights{Gate: bf16(NE, E), Bias: make([]float32, NE), Down: bf16(L, E), Up: bf16(E, L),
		Norm: randv(L), SharedGate: bf16(SI, E), SharedUp: bf16(SI, E), SharedDown: bf16(E, SI)}
	bytesPerStep += K * 3 * expertBytes
	b.Run("readloop", func(b *testing.B) { testkit.ReadLoop(b, make([]byte, bytesPerStep)) })
	for _, T := range []int{1, 32} {
		x := testkit.Gaussian(rng, T*E, 1)
		out := make([]float32, T*E)
		for _, workers := range []int{1, 2} {
			m, err := New(Config{Layer: 0, Hidden: E, Latent: L, Inter: I, TopK: K, RoutedScale: 1, Renorm: true,
				LatentNorm: true, Beta1: 4, Beta2: 25, RMSEps: 1e-5, Workers: workers}, w, NewMemExperts(map[int][]Expert{0: experts}))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("T=%d/workers=%d", T, workers), func(b *testing.B) {
				if T == 1 {
					b.SetBytes(int64(bytesPerStep))
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := m.Forward(out, x, T); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
