package moe

import (
	"math"
	"testing"

	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/quant"
)

func mat(t testing.TB, w []float32, rows, cols int) quant.Matrix {
	t.Helper()
	m, err := quant.F32FromFloats(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v: not bit-identical", what, i, got[i], want[i])
		}
	}
}

// moeFromFixture binds ops/moe.json (prefix "") or the FFN part of a layer
// fixture (prefix "mlp_") with f32 experts.
func moeFromFixture(t testing.TB, f *opfix.Fixture, prefix string, layer, workers int) (*MoE, *MemExperts) {
	t.Helper()
	const E, L, I, NE, K, SI = 128, 64, 48, 8, 2, 96
	experts := make([]Expert, NE)
	for e := range NE {
		p := prefix + "experts_" + itoa(e) + "_"
		experts[e] = Expert{
			W1: mat(t, f.F32(p+"w1_weight", I, L), I, L),
			W3: mat(t, f.F32(p+"w3_weight", I, L), I, L),
			W2: mat(t, f.F32(p+"w2_weight", L, I), L, I),
		}
	}
	src := NewMemExperts(map[int][]Expert{layer: experts})
	cfg := Config{Layer: layer, Hidden: E, Latent: L, Inter: I, TopK: K, RoutedScale: 1, Renorm: true,
		LatentNorm: true, Beta1: 4, Beta2: 25, RMSEps: 1e-5, Workers: workers}
	w := Weights{
		Gate: mat(t, f.F32(prefix+"gate_weight", NE, E), NE, E), Bias: f.F32(prefix+"e_score_correction_bias", NE),
		Down: mat(t, f.F32(prefix+"down_weight", L, E), L, E), Up: mat(t, f.F32(prefix+"up_weight", E, L), E, L),
		Norm:       f.F32(prefix+"norm_weight", L),
		SharedGate: mat(t, f.F32(prefix+"shared_w1_weight", SI, E), SI, E),
		SharedUp:   mat(t, f.F32(prefix+"shared_w3_weight", SI, E), SI, E),
		SharedDown: mat(t, f.F32(prefix+"shared_w2_weight", E, SI), E, SI),
	}
	m, err := New(cfg, w, src)
	if err != nil {
		t.Fatal(err)
	}
	return m, src
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}
