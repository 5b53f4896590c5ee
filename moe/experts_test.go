package moe

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/mxfp4"
)

type failingSource struct{ err error }

type sourceError struct{ err error }

func (e *sourceError) Error() string { return "source: " + e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

func (f failingSource) Experts(layer int, ids []int, dst []Expert) ([]Expert, func(), error) {
	return nil, nil, f.err
}

func TestMoEExpertLoadError(t *testing.T) {
	f := opfix.Load(t, "moe")
	m, _ := moeFromFixture(t, f, "", 9, 1)
	in := f.F32("in", 1, 3, 128)
	out := make([]float32, len(in))
	io := errors.New("disk on fire")
	// The source's error, typed as the source types it, reaches the caller.
	m.src = failingSource{&sourceError{io}}
	err := m.Forward(out, in, 3)
	var se *sourceError
	if !errors.As(err, &se) || !errors.Is(err, io) || !strings.Contains(err.Error(), "layer 9") {
		t.Fatalf("err = %v, want the source's error, wrapped with the layer", err)
	}
	// A layer the in-memory source does not hold.
	_, src := moeFromFixture(t, f, "", 9, 1)
	m.src = src
	m.cfg.Layer = 10
	if err := m.Forward(out, in, 3); err == nil || !strings.Contains(err.Error(), "layer 10") {
		t.Fatalf("err = %v, want a failure naming layer 10", err)
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
