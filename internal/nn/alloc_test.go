package nn

import (
	"math/rand/v2"
	"testing"
)

// With a reused Workspace the residual wiring of a decode step allocates
// only the partial sum a block-boundary layer starts.
func TestResidualStepAllocations(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const E = 40
	vec := func() []float32 {
		v := make([]float32, E)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	agg := func() *AttnRes {
		a, err := NewAttnRes(vec(), vec(), 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	mix := func(dst, x []float32, _ int) error {
		for i, v := range x {
			dst[i] = 0.5 * v
		}
		return nil
	}
	inner := &Residual{InputNorm: vec(), PostNorm: vec(), AttnRes: agg(), MLPRes: agg(), Eps: 1e-5}
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
