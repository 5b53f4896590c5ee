package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// Forward, which takes no ConvCall, allocates nothing on a layer too narrow
// to split.
func TestShortConvForwardAllocatesNothing(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	s, err := NewShortConv(64, 4, make([]float32, 64*4))
	if err != nil {
		t.Fatal(err)
	}
	x, tail := make([]float32, 64), make([]float32, s.TailLen())
	testkit.NoAllocs(t, "Forward", 20, func() { _ = s.Forward(x, x, tail, 1) })
}

// With a reused Workspace the residual wiring of a decode step allocates
// only the partial sum a block-boundary layer starts.
func TestResidualStepAllocations(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const E = 40
	vec := func() []float32 { return testkit.Gaussian(r, E, 1) }
	agg := func() *AttnRes {
		a, err := NewAttnRes(vec(), vec(), 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	mix := func(dst, x []float32, _, _ int) error {
		for i, v := range x {
			dst[i] = 0.5 * v
		}
		return nil
	}
	inner := &Residual{InputNorm: F32(vec()), PostNorm: F32(vec()), AttnRes: agg(), MLPRes: agg(), Eps: 1e-5}
	boundary := *inner
	boundary.Boundary = true
	out := agg()
	ws := NewWorkspace()
	h := make([]float32, E)
	step := func() {
		s, err := NewStream(vec(), 1, E)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []*Residual{&boundary, inner, inner, &boundary, inner} {
			if err := l.ForwardWith(s, mix, mix, 1, ws); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AggregateWith(h, out, 1, ws); err != nil {
			t.Fatal(err)
		}
	}
	step()
	s, _ := NewStream(vec(), 1, E)
	if err := boundary.ForwardWith(s, mix, mix, 1, ws); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = inner.ForwardWith(s, mix, mix, 1, ws) }); n != 0 {
		t.Errorf("inner layer: %v allocations", n)
	}
	if n := testing.AllocsPerRun(20, func() { _ = s.AggregateWith(h, out, 1, ws) }); n != 0 {
		t.Errorf("output aggregation: %v allocations", n)
	}
	// Forward and ForwardWith agree bit for bit.
	s1, _ := NewStream(append([]float32(nil), h...), 1, E)
	s2, _ := NewStream(append([]float32(nil), h...), 1, E)
	for _, l := range []*Residual{&boundary, inner, &boundary} {
		if err := l.Forward(s1, mix, mix, 2); err != nil {
			t.Fatal(err)
		}
		if err := l.ForwardWith(s2, mix, mix, 1, ws); err != nil {
			t.Fatal(err)
		}
	}
	for i := range s1.H {
		if s1.H[i] != s2.H[i] {
			t.Fatalf("H[%d]: Forward %v, ForwardWith %v", i, s1.H[i], s2.H[i])
		}
	}
}

// TestStreamReset: Reset validates like NewStream and keeps the block list's capacity.
func TestStreamReset(t *testing.T) {
	s, err := NewStream(make([]float32, 8), 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	s.Blocks = append(s.Blocks, make([]float32, 8), make([]float32, 8))
	c := cap(s.Blocks)
	h := make([]float32, 4)
	if err := s.Reset(h, 1, 4); err != nil {
		t.Fatal(err)
	}
	if s.T != 1 || s.E != 4 || &s.H[0] != &h[0] || len(s.Blocks) != 0 || cap(s.Blocks) != c {
		t.Fatalf("Reset: T=%d E=%d len(Blocks)=%d cap %d (want cap %d)", s.T, s.E, len(s.Blocks), cap(s.Blocks), c)
	}
	if err := s.Reset(h, 2, 4); err == nil {
		t.Fatal("Reset accepted 4 elements for 2×4")
	}
}

// TestResidualForwardFrom: ForwardFrom's rows from `from` on, and AggregateFrom over them, are
// ForwardWith's and AggregateWith's bit for bit, whatever the attention mixer leaves in the rows
// before from; the FFN sees only those rows; a from outside [0, T) is an error.
func TestResidualForwardFrom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const E, T = 24, 5
	vec := func(n int) []float32 { return testkit.Gaussian(r, n, 1) }
	agg := func() *AttnRes {
		a, err := NewAttnRes(vec(E), vec(E), 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// The attention mixer writes NaN into the rows it is told nobody reads: rows from `from`
	// on must not depend on them.
	attn := func(dst, x []float32, _, from int) error {
		for i, v := range x {
			dst[i] = 0.5*v + 0.25
			if i < from*E {
				dst[i] = float32(math.NaN())
			}
		}
		return nil
	}
	var ffnRows, ffnFrom int
	ffn := func(dst, x []float32, n, from int) error {
		ffnRows, ffnFrom = n, from
		for i, v := range x {
			dst[i] = v * v
		}
		return nil
	}
	inner := &Residual{InputNorm: F32(vec(E)), PostNorm: F32(vec(E)), AttnRes: agg(), MLPRes: agg(), Eps: 1e-5}
	boundary := *inner
	boundary.Boundary = true
	out := agg()
	h0 := vec(T * E)
	for from := range T {
		run := func(last int) ([]float32, []float32) {
			s, err := NewStream(append([]float32(nil), h0...), T, E)
			if err != nil {
				t.Fatal(err)
			}
			ws := NewWorkspace()
			for _, l := range []*Residual{&boundary, inner, inner, &boundary} {
				if err := l.ForwardWith(s, attn, ffn, 2, ws); err != nil {
					t.Fatal(err)
				}
			}
			if err := inner.ForwardFrom(s, attn, ffn, 2, ws, last); err != nil {
				t.Fatal(err)
			}
			if ffnRows != T-last || ffnFrom != 0 {
				t.Fatalf("from %d: the FFN saw %d rows from %d, want %d from 0", last, ffnRows, ffnFrom, T-last)
			}
			dst := make([]float32, (T-last)*E)
			if err := s.AggregateFrom(dst, out, last, 2, ws); err != nil {
				t.Fatal(err)
			}
			return append([]float32(nil), s.H[last*E:]...), dst
		}
		wantH, wantOut := run(0)
		gotH, gotOut := run(from)
		for i := range gotH {
			if gotH[i] != wantH[from*E+i] || gotOut[i] != wantOut[from*E+i] {
				t.Fatalf("from %d: element %d of the rows differs", from, i)
			}
		}
	}
	s, _ := NewStream(vec(T*E), T, E)
	for _, from := range []int{-1, T} {
		if err := inner.ForwardFrom(s, attn, ffn, 1, nil, from); err == nil {
			t.Errorf("ForwardFrom(from=%d) of %d positions: no error", from, T)
		}
	}
	if err := s.AggregateFrom(make([]float32, E), out, 0, 1, nil); err == nil {
		t.Error("AggregateFrom with a short dst: no error")
	}
}
