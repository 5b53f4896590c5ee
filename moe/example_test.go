package moe_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
)

func randMatrix(r *rand.Rand, rows, cols int) quant.Matrix {
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.2)
	}
	m, err := quant.F32FromFloats(rows, cols, w)
	if err != nil {
		panic(err)
	}
	return m
}

// A LatentMoE layer with four in-memory experts, top-2 routing and a shared
// expert; ForwardRouted also reports the picks.
func ExampleMoE() {
	const E, L, I, NE, SI = 16, 8, 8, 4, 12
	r := rand.New(rand.NewPCG(5, 6))
	experts := make([]moe.Expert, NE)
	for e := range experts {
		experts[e] = moe.Expert{W1: randMatrix(r, I, L), W3: randMatrix(r, I, L), W2: randMatrix(r, L, I)}
	}
	norm := make([]float32, L)
	for i := range norm {
		norm[i] = 1
	}
	layer, err := moe.New(
		moe.Config{Layer: 1, Hidden: E, Latent: L, Inter: I, TopK: 2, RoutedScale: 1, Renorm: true,
			LatentNorm: true, Beta1: 4, Beta2: 25, RMSEps: 1e-5},
		moe.Weights{Gate: randMatrix(r, NE, E), Bias: []float32{0, 0, 0, 1}, // expert 3 is favoured
			Down: randMatrix(r, L, E), Up: randMatrix(r, E, L), Norm: norm,
			SharedGate: randMatrix(r, SI, E), SharedUp: randMatrix(r, SI, E), SharedDown: randMatrix(r, E, SI)},
		moe.NewMemExperts(map[int][]moe.Expert{1: experts}))
	if err != nil {
		fmt.Println(err)
		return
	}
	x := make([]float32, 2*E)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	out := make([]float32, 2*E)
	ids := make([]int, 2*2)
	if err := layer.ForwardRouted(out, x, 2, ids); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first pick of each position:", ids[0], ids[2])
	// Output:
	// first pick of each position: 3 3
}
