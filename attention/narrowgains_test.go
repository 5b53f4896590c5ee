package attention

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// bf16Gain returns n gains with bfloat16 values, as a checkpoint's widened gains are.
func bf16Gain(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = floatbits.BF16(uint16(0x3f00 + r.IntN(0x100)))
	}
	return v
}

// TestGainsHeldNarrow: MLA and KDA hold gains widened from bfloat16 in two bytes an element and
// keep no float32 copy of them in their weights.
func TestGainsHeldNarrow(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 7))
	const E = 48
	kc := KDAConfig{Hidden: E, Heads: 3, HeadDim: 8, ConvK: 4, GateLB: -5, RMSEps: 1e-5}
	mc := MLAConfig{Hidden: E, Heads: 3, QLoRA: 16, KVLoRA: 16, NoPE: 8, Rope: 4, VHead: 8, RMSEps: 1e-5}
	mw := mlaWeights(r, mc, bf16s(t, r))
	mw.QANorm, mw.KVANorm = bf16Gain(r, len(mw.QANorm)), bf16Gain(r, len(mw.KVANorm))
	m, err := NewMLA(mc, mw)
	if err != nil {
		t.Fatal(err)
	}
	if m.qaNorm.Bytes() != 2*int64(len(mw.QANorm)) || m.kvaNorm.Bytes() != 2*int64(len(mw.KVANorm)) {
		t.Errorf("MLA gains held in %d and %d bytes, want 2 per element", m.qaNorm.Bytes(), m.kvaNorm.Bytes())
	}
	if m.w.QANorm != nil || m.w.KVANorm != nil {
		t.Error("MLA keeps the float32 gains")
	}
	kw := kdaWeights(r, kc, kc.HeadDim, bf16s(t, r))
	kw.ONorm = bf16Gain(r, len(kw.ONorm))
	k, err := NewKDA(kc, kw)
	if err != nil {
		t.Fatal(err)
	}
	if k.oNorm.Bytes() != 2*int64(len(kw.ONorm)) || k.w.ONorm != nil {
		t.Errorf("KDA o_norm held in %d bytes (want %d), float32 copy kept: %v", k.oNorm.Bytes(), 2*len(kw.ONorm), k.w.ONorm != nil)
	}
}
