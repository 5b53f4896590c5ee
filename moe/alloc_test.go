package moe

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/quant"
)

// naiveMat is a quant.Matrix that never allocates in MatVec/MatMul, so an
// allocation count over a Forward call measures this package alone.
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

// reuseSource serves experts from one reused slice (no allocation per call).
type reuseSource struct {
	all []Expert
	out []Expert
}

func (s *reuseSource) Experts(_ int, ids []int) ([]Expert, func(), error) {
	s.out = s.out[:0]
	for _, id := range ids {
		s.out = append(s.out, s.all[id])
	}
	return s.out, nil, nil
}

// With a reused Workspace a decode step allocates nothing in this package
// (one worker; the matrices and the source above allocate nothing either).
func TestDecodeStepAllocations(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	nm := func(rows, cols int) quant.Matrix {
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32(r.NormFloat64() * 0.2)
		}
		return naiveMat{rows, cols, w}
	}
	const E, L, I, NE, K, SI = 32, 16, 24, 6, 2, 20
	src := &reuseSource{out: make([]Expert, 0, NE)}
	for range NE {
		src.all = append(src.all, Expert{W1: nm(I, L), W3: nm(I, L), W2: nm(L, I)})
	}
	m, err := New(Config{Layer: 1, Hidden: E, Latent: L, Inter: I, TopK: K, RoutedScale: 1, Renorm: true,
		LatentNorm: true, Beta1: 4, Beta2: 25, RMSEps: 1e-5, Workers: 1},
		Weights{Gate: nm(NE, E), Down: nm(L, E), Up: nm(E, L), Norm: make([]float32, L),
			SharedGate: nm(SI, E), SharedUp: nm(SI, E), SharedDown: nm(E, SI)}, src)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDense(nm(SI, E), nm(SI, E), nm(E, SI), 4, 25, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, out, ids := make([]float32, E), make([]float32, E), make([]int, K)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	ws := NewWorkspace()
	if err := m.ForwardRoutedWith(out, x, 1, ids, ws); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = m.ForwardRoutedWith(out, x, 1, ids, ws) }); n != 0 {
		t.Errorf("MoE decode step: %v allocations", n)
	}
	if n := testing.AllocsPerRun(20, func() { _ = d.ForwardWith(out, x, 1, ws) }); n != 0 {
		t.Errorf("dense decode step: %v allocations", n)
	}
}
