package attention

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/quant"
)

// naiveMat is a quant.Matrix that never allocates in MatVec/MatMul/DecodeRow,
// so an allocation count over a Forward call measures this package alone.
type naiveMat struct {
	rows, cols int
	w          []float32
}

func (m naiveMat) Format() quant.Format { return quant.F32 }
func (m naiveMat) Rows() int            { return m.rows }
func (m naiveMat) Cols() int            { return m.cols }
func (m naiveMat) MatVec(dst, x []float32) {
	m.MatMul(dst, m.rows, x, 1)
}
func (m naiveMat) MatMul(dst []float32, stride int, x []float32, n int) {
	for t := range n {
		for r := range m.rows {
			var acc float64
			for c, v := range m.w[r*m.cols : (r+1)*m.cols] {
				acc += float64(v) * float64(x[t*m.cols+c])
			}
			dst[t*stride+r] = float32(acc)
		}
	}
}
func (m naiveMat) Slice(lo, hi int) quant.Matrix {
	return naiveMat{rows: hi - lo, cols: m.cols, w: m.w[lo*m.cols : hi*m.cols]}
}
func (m naiveMat) DecodeRow(dst []float32, r int) { copy(dst, m.w[r*m.cols:(r+1)*m.cols]) }

// With a reused Workspace a decode step allocates nothing in this package
// (one worker; the matrices above allocate nothing either).
func TestDecodeStepAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	r := rand.New(rand.NewPCG(3, 4))
	nm := func(rows, cols int) quant.Matrix { return naiveMat{rows, cols, randF32(r, rows*cols, 0.2)} }
	const E, H, D, K = 32, 2, 16, 4
	P := H * D
	k, err := NewKDA(KDAConfig{Hidden: E, Heads: H, HeadDim: D, ConvK: K, GateLB: -5, RMSEps: 1e-5, Workers: 1},
		KDAWeights{Q: nm(P, E), K: nm(P, E), V: nm(P, E), G: nm(P, E), B: nm(H, E), FA: nm(D, E), FB: nm(P, D), O: nm(E, P),
			QConv: randF32(r, P*K, 0.5), KConv: randF32(r, P*K, 0.5), VConv: randF32(r, P*K, 0.5),
			ALog: randF32(r, H, 0.5), DtBias: randF32(r, P, 0.5), ONorm: randF32(r, D, 1)})
	if err != nil {
		t.Fatal(err)
	}
	const Hm, Rq, Rkv, dn, dr, dv = 2, 16, 20, 8, 4, 8
	m, err := NewMLA(MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
		OutGate: true, RMSEps: 1e-5, Workers: 1},
		MLAWeights{QA: nm(Rq, E), QANorm: randF32(r, Rq, 1), QB: nm(Hm*(dn+dr), Rq), KVA: nm(Rkv+dr, E),
			KVANorm: randF32(r, Rkv, 1), KVB: nm(Hm*(dn+dv), Rkv), O: nm(E, Hm*dv), G: nm(Hm*dv, E)})
	if err != nil {
		t.Fatal(err)
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
