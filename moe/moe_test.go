package moe

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/mxfp4"
)

func TestMoEFixture(t *testing.T) {
	f := opfix.Load(t, "moe")
	for key, want := range map[string]int{"hidden": 128, "latent": 64, "moe_inter": 48, "n_experts": 8, "top_k": 2,
		"n_shared": 2, "renorm": 1, "latent_norm": 1} {
		if got := f.Int(key); got != want {
			t.Fatalf("fixture %s = %d, test binds %d", key, got, want)
		}
	}
	if f.Scalar("routed_scale") != 1 || f.Scalar("situ_b1") != 4 || f.Scalar("situ_b2") != 25 || float32(f.Scalar("rms_eps")) != 1e-5 {
		t.Fatal("fixture scalars differ from the bound config")
	}
	m, _ := moeFromFixture(t, f, "", 5, 1)
	in := f.F32("in", 1, 3, 128)
	out := make([]float32, len(in))
	if err := m.Forward(out, in, 3); err != nil {
		t.Fatal(err)
	}
	opfix.Compare(t, f.Tol, "moe out", out, f.F32("out", 1, 3, 128))
}

// countingSource records how the MoE asks for experts.
type countingSource struct {
	inner    ExpertSource
	calls    [][]int
	released int
}

func (c *countingSource) Experts(layer int, ids []int, dst []Expert) ([]Expert, func(), error) {
	c.calls = append(c.calls, append([]int(nil), ids...))
	ex, rel, err := c.inner.Experts(layer, ids, dst)
	return ex, func() { c.released++; rel() }, err
}

// E1: chunk-union MoE over T positions ≡ one position at a time ≡ any
// worker count; the union is fetched in one call and released once.
func TestMoEChunkUnionBitIdentical(t *testing.T) {
	f := opfix.Load(t, "moe")
	in := f.F32("in", 1, 3, 128)
	// More positions: the fixture rows plus mixtures of them.
	const T = 7
	x := make([]float32, T*128)
	copy(x, in)
	for t := 3; t < T; t++ {
		for i := range 128 {
			x[t*128+i] = in[(t%3)*128+i]*0.7 - in[((t+1)%3)*128+i]*0.4
		}
	}
	m1, src := moeFromFixture(t, f, "", 2, 1)
	cs := &countingSource{inner: src}
	m1.src = cs
	all := make([]float32, T*128)
	ids := make([]int, T*2)
	if err := m1.ForwardRouted(all, x, T, ids); err != nil {
		t.Fatal(err)
	}
	if len(cs.calls) != 1 || cs.released != 1 {
		t.Fatalf("%d Experts calls, %d releases; want one of each", len(cs.calls), cs.released)
	}
	union := map[int]bool{}
	for _, id := range ids {
		union[id] = true
	}
	if len(cs.calls[0]) != len(union) {
		t.Fatalf("requested %v for picks %v", cs.calls[0], ids)
	}
	one := make([]float32, T*128)
	for tt := range T {
		if err := m1.Forward(one[tt*128:(tt+1)*128], x[tt*128:(tt+1)*128], 1); err != nil {
			t.Fatal(err)
		}
	}
	testkit.RequireSameBits(t, "per-token vs chunk-union", one, all)
	for _, w := range []int{2, 3} {
		mw, _ := moeFromFixture(t, f, "", 2, w)
		got := make([]float32, T*128)
		if err := mw.Forward(got[:3*128], x[:3*128], 3); err != nil {
			t.Fatal(err)
		}
		if err := mw.Forward(got[3*128:], x[3*128:], T-3); err != nil {
			t.Fatal(err)
		}
		testkit.RequireSameBits(t, fmt.Sprintf("workers=%d chunks [3 %d]", w, T-3), got, all)
	}
}

type failingSource struct{ err error }

func (f failingSource) Experts(layer int, ids []int, dst []Expert) ([]Expert, func(), error) {
	return nil, nil, f.err
}

func TestMoEExpertLoadError(t *testing.T) {
	f := opfix.Load(t, "moe")
	m, _ := moeFromFixture(t, f, "", 9, 1)
	in := f.F32("in", 1, 3, 128)
	out := make([]float32, len(in))
	io := errors.New("disk on fire")
	m.src = failingSource{&ExpertLoadError{Layer: 9, Expert: 3, Err: io}}
	err := m.Forward(out, in, 3)
	var le *ExpertLoadError
	if !errors.As(err, &le) || le.Layer != 9 || le.Expert != 3 || !errors.Is(err, io) {
		t.Fatalf("err = %v, want *ExpertLoadError{9, 3}", err)
	}
	m.src = failingSource{io} // an untyped failure is still surfaced as *ExpertLoadError
	if err := m.Forward(out, in, 3); !errors.As(err, &le) || le.Layer != 9 || !errors.Is(err, io) {
		t.Fatalf("err = %v, want a wrapped *ExpertLoadError", err)
	}
	// A layer the in-memory source does not hold.
	_, src := moeFromFixture(t, f, "", 9, 1)
	m.src = src
	m.cfg.Layer = 10
	if err := m.Forward(out, in, 3); !errors.As(err, &le) || le.Layer != 10 {
		t.Fatalf("err = %v, want *ExpertLoadError for layer 10", err)
	}
}

// MXFP4 experts (the checkpoint's format) run through the same path; the
// result must match f32 experts holding the exactly dequantised weights to
// within reduction-order rounding (RG vs R16 partitions).
func TestMoEMXFP4Experts(t *testing.T) {
	const E, L, I, NE, K = 64, 64, 96, 6, 3
	rng := rand.New(rand.NewPCG(7, 8))
	randm := func(rows, cols int, s float64) []float32 { return testkit.Gaussian(rng, rows*cols, s) }
	var q4, f32 []Expert
	toPair := func(w []float32, rows, cols int) (quant.Matrix, quant.Matrix) {
		p, s, err := mxfp4.Quantize(w, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		mq, err := quant.NewMXFP4(rows, cols, p, s)
		if err != nil {
			t.Fatal(err)
		}
		deq := make([]float32, rows*cols)
		if err := mxfp4.Dequantize(deq, p, s, rows, cols); err != nil {
			t.Fatal(err)
		}
		return mq, opfix.Matrix(t, deq, rows, cols)
	}
	for range NE {
		a1, b1 := toPair(randm(I, L, 0.2), I, L)
		a3, b3 := toPair(randm(I, L, 0.2), I, L)
		a2, b2 := toPair(randm(L, I, 0.2), L, I)
		q4 = append(q4, Expert{W1: a1, W3: a3, W2: a2})
		f32 = append(f32, Expert{W1: b1, W3: b3, W2: b2})
	}
	cfg := Config{Layer: 4, Hidden: E, Latent: L, Inter: I, TopK: K, RoutedScale: 2.5, Renorm: true,
		LatentNorm: true, Beta1: 4, Beta2: 25, RMSEps: 1e-5}
	w := Weights{Gate: opfix.Matrix(t, randm(NE, E, 0.3), NE, E), Bias: randm(NE, 1, 0.05)[:NE],
		Down: opfix.Matrix(t, randm(L, E, 0.2), L, E), Up: opfix.Matrix(t, randm(E, L, 0.2), E, L), Norm: randm(L, 1, 1)[:L]}
	mq, err := New(cfg, w, NewMemExperts(map[int][]Expert{4: q4}))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := New(cfg, w, NewMemExperts(map[int][]Expert{4: f32}))
	if err != nil {
		t.Fatal(err)
	}
	const T = 5
	x := randm(T, E, 1)
	a, b := make([]float32, T*E), make([]float32, T*E)
	if err := mq.Forward(a, x, T); err != nil {
		t.Fatal(err)
	}
	if err := mf.Forward(b, x, T); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range a {
		d := math.Abs(float64(a[i]-b[i])) / (1e-6 + 1e-5*math.Abs(float64(b[i])))
		worst = max(worst, d)
	}
	if worst > 1 {
		t.Fatalf("MXFP4 vs dequantised f32 experts: max error ratio %.3f at 1e-6 + 1e-5·|b|", worst)
	}
	t.Logf("MXFP4 vs dequantised f32 experts: max ratio %.4f of 1e-6 + 1e-5·|b|", worst)
	if a[0] == 0 && a[1] == 0 {
		t.Fatal("degenerate output")
	}
}

func TestDenseMatchesFloat64Reference(t *testing.T) {
	const E, I, T = 32, 48, 3
	rng := rand.New(rand.NewPCG(1, 2))
	randv := func(n int, s float64) []float32 { return testkit.Gaussian(rng, n, s) }
	wg, wu, wd := randv(I*E, 0.5), randv(I*E, 0.5), randv(E*I, 0.3)
	d, err := NewDense(opfix.Matrix(t, wg, I, E), opfix.Matrix(t, wu, I, E), opfix.Matrix(t, wd, E, I), 4, 25, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := randv(T*E, 2)
	out := make([]float32, T*E)
	if err := d.Forward(out, x, T); err != nil {
		t.Fatal(err)
	}
	for tt := range T {
		h := make([]float64, I)
		for i := range I {
			var g, u float64
			for j := range E {
				g += float64(wg[i*E+j]) * float64(x[tt*E+j])
				u += float64(wu[i*E+j]) * float64(x[tt*E+j])
			}
			h[i] = 4 * math.Tanh(g/4) / (1 + math.Exp(-g)) * 25 * math.Tanh(u/25)
		}
		for o := range E {
			var s float64
			for i := range I {
				s += float64(wd[o*I+i]) * h[i]
			}
			if got := float64(out[tt*E+o]); math.Abs(got-s) > 1e-5+1e-4*math.Abs(s) {
				t.Fatalf("out[%d][%d] = %v, float64 reference %v", tt, o, got, s)
			}
		}
	}
	if _, err := NewDense(opfix.Matrix(t, wg, I, E), opfix.Matrix(t, wu, I, E), opfix.Matrix(t, wg, I, E), 4, 25, 1); err == nil {
		t.Error("mis-shaped down accepted")
	}
}
