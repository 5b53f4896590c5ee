package moe

import (
	"testing"

	"github.com/k3-project/k3/internal/testkit/opfix"
)

// moeFromFixture binds ops/moe.json (prefix "") or the FFN part of a layer
// fixture (prefix "mlp_") with f32 experts.
func moeFromFixture(t testing.TB, f *opfix.Fixture, prefix string, layer, workers int) (*MoE, *MemExperts) {
	t.Helper()
	const E, L, I, NE, K, SI = 128, 64, 48, 8, 2, 96
	experts := make([]Expert, NE)
	for e := range NE {
		p := prefix + "experts_" + itoa(e) + "_"
		experts[e] = Expert{
			W1: f.Matrix(p+"w1_weight", I, L),
			W3: f.Matrix(p+"w3_weight", I, L),
			W2: f.Matrix(p+"w2_weight", L, I),
		}
	}
	src := NewMemExperts(map[int][]Expert{layer: experts})
	cfg := Config{Layer: layer, Hidden: E, Latent: L, Inter: I, TopK: K, RoutedScale: 1, Renorm: true,
		LatentNorm: true, Beta1: 4, Beta2: 25, RMSEps: 1e-5, Workers: workers}
	w := Weights{
		Gate: f.Matrix(prefix+"gate_weight", NE, E), Bias: f.F32(prefix+"e_score_correction_bias", NE),
		Down: f.Matrix(prefix+"down_weight", L, E), Up: f.Matrix(prefix+"up_weight", E, L),
		Norm:       f.F32(prefix+"norm_weight", L),
		SharedGate: f.Matrix(prefix+"shared_w1_weight", SI, E),
		SharedUp:   f.Matrix(prefix+"shared_w3_weight", SI, E),
		SharedDown: f.Matrix(prefix+"shared_w2_weight", E, SI),
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
