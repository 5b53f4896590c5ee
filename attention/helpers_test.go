package attention

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/quant"
)

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

func randBF16(t testing.TB, r *rand.Rand, rows, cols int) quant.Matrix {
	return opfix.BF16(t, testkit.Gaussian(r, rows*cols, 0.15), rows, cols)
}

// kdaWeights draws KDA weights of c's shapes: matrices from mat, vectors
// from r, in field order, so a recorded digest depends on the draws staying
// in this order. alog is the length of A_log (the layer reads one rate per
// head; some tests draw one per channel).
func kdaWeights(r *rand.Rand, c KDAConfig, alog int, mat func(rows, cols int) quant.Matrix) KDAWeights {
	E, H, D, K := c.Hidden, c.Heads, c.HeadDim, c.ConvK
	P := H * D
	return KDAWeights{Q: mat(P, E), K: mat(P, E), V: mat(P, E), G: mat(P, E),
		B: mat(H, E), FA: mat(D, E), FB: mat(P, D), O: mat(E, P),
		QConv: testkit.Gaussian(r, P*K, 0.5), KConv: testkit.Gaussian(r, P*K, 0.5), VConv: testkit.Gaussian(r, P*K, 0.5),
		ALog: testkit.Gaussian(r, alog, 0.5), DtBias: testkit.Gaussian(r, P, 0.5), ONorm: testkit.Gaussian(r, D, 1)}
}

// mlaWeights draws MLA weights of c's shapes (the output gate when
// c.OutGate) like kdaWeights, in field order.
func mlaWeights(r *rand.Rand, c MLAConfig, mat func(rows, cols int) quant.Matrix) MLAWeights {
	E, Hm, dn, dr, dv := c.Hidden, c.Heads, c.NoPE, c.Rope, c.VHead
	w := MLAWeights{QA: mat(c.QLoRA, E), QANorm: testkit.Gaussian(r, c.QLoRA, 1), QB: mat(Hm*(dn+dr), c.QLoRA),
		KVA: mat(c.KVLoRA+dr, E), KVANorm: testkit.Gaussian(r, c.KVLoRA, 1), KVB: mat(Hm*(dn+dv), c.KVLoRA),
		O: mat(E, Hm*dv)}
	if c.OutGate {
		w.G = mat(Hm*dv, E)
	}
	return w
}

// f32s draws f32 matrices of deviation s from r.
func f32s(t testing.TB, r *rand.Rand, s float64) func(rows, cols int) quant.Matrix {
	return func(rows, cols int) quant.Matrix {
		return opfix.Matrix(t, testkit.Gaussian(r, rows*cols, s), rows, cols)
	}
}

// bf16s draws bf16 matrices from r.
func bf16s(t testing.TB, r *rand.Rand) func(rows, cols int) quant.Matrix {
	return func(rows, cols int) quant.Matrix { return randBF16(t, r, rows, cols) }
}

// inChunks runs forward over the positions of x (E values each) in
// consecutive chunks of the given sizes, which must cover x, and returns the
// outputs: the chunking and worker tests compare them bit for bit.
func inChunks(t testing.TB, E int, x []float32, chunks []int, forward func(dst, x []float32, n int) error) []float32 {
	t.Helper()
	out := make([]float32, len(x))
	pos := 0
	for _, n := range chunks {
		if err := forward(out[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n); err != nil {
			t.Fatal(err)
		}
		pos += n
	}
	if pos*E != len(x) {
		t.Fatalf("chunks %v cover %d of %d positions", chunks, pos, len(x)/E)
	}
	return out
}

// layer is a bound attention layer that runs on a state S: KDA on its
// recurrent state, MLA on its cache.
type layer[S any] interface {
	Forward(dst, x []float32, n int, s S) error
}

// runLayer binds a layer with bind, makes its state with state and runs it
// over x (hidden values a position) in chunks, returning the outputs and the
// state after them.
func runLayer[L layer[S], S any](t *testing.T, bind func() (L, error), state func(L) S, hidden int, x []float32, chunks []int) ([]float32, S) {
	t.Helper()
	l, err := bind()
	if err != nil {
		t.Fatal(err)
	}
	s := state(l)
	return inChunks(t, hidden, x, chunks, func(dst, x []float32, n int) error { return l.Forward(dst, x, n, s) }), s
}

// runKDA binds a KDA layer of c on workers and runs it over x in chunks,
// returning the outputs and the state after them.
func runKDA(t *testing.T, c KDAConfig, w KDAWeights, workers int, x []float32, chunks []int) ([]float32, *KDAState) {
	t.Helper()
	c.Workers = workers
	return runLayer(t, func() (*KDA, error) { return NewKDA(c, w) }, (*KDA).NewState, c.Hidden, x, chunks)
}

// runMLA is runKDA for an MLA layer, returning its cache.
func runMLA(t *testing.T, c MLAConfig, w MLAWeights, workers int, x []float32, chunks []int) ([]float32, *MLACache) {
	t.Helper()
	c.Workers = workers
	return runLayer(t, func() (*MLA, error) { return NewMLA(c, w) }, (*MLA).NewCache, c.Hidden, x, chunks)
}
