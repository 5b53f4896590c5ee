package moe

import (
	"fmt"
	"slices"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
)

// limitedSource is a countingSource that also limits the experts per call.
type limitedSource struct {
	countingSource
	limit int
	held  int // experts leased and not yet released
	peak  int
}

func (s *limitedSource) MaxBatch() int { return s.limit }

func (s *limitedSource) Experts(layer int, ids []int, dst []Expert) ([]Expert, func(), error) {
	if s.limit > 0 && len(ids) > s.limit {
		return nil, nil, fmt.Errorf("%d ids above MaxBatch %d", len(ids), s.limit)
	}
	s.calls = append(s.calls, slices.Clone(ids))
	ex, rel, err := s.inner.Experts(layer, ids, dst)
	if err != nil {
		return nil, nil, err
	}
	s.held += len(ids)
	s.peak = max(s.peak, s.held)
	n := len(ids)
	return ex, func() { s.released++; s.held -= n; rel() }, nil
}

// Waves of at most MaxBatch experts give the single-wave bits, fetch every
// unique expert exactly once in first-appearance order, and never hold more
// than MaxBatch experts at a time; for any worker count.
func TestMoEWavesBitIdentical(t *testing.T) {
	f := opfix.Load(t, "moe")
	in := f.F32("in", 1, 3, 128)
	const T = 9
	x := make([]float32, T*128)
	for tt := range T {
		for i := range 128 {
			x[tt*128+i] = in[(tt%3)*128+i]*float32(1+tt%4)*0.5 - in[((tt+2)%3)*128+i]*0.3
		}
	}
	for _, workers := range []int{1, 2, 3} {
		ref, _ := moeFromFixture(t, f, "", 4, workers)
		want := make([]float32, T*128)
		ids := make([]int, T*2)
		if err := ref.ForwardRouted(want, x, T, ids); err != nil {
			t.Fatal(err)
		}
		var union []int
		for _, id := range ids {
			if !slices.Contains(union, id) {
				union = append(union, id)
			}
		}
		if len(union) < 3 {
			t.Fatalf("only %d distinct experts: the test needs several waves", len(union))
		}
		for _, limit := range []int{1, 2, 3, len(union) - 1, len(union), 0} {
			m, src := moeFromFixture(t, f, "", 4, workers)
			m.minWork = 1 // split the experts over the workers even on this small layer
			ls := &limitedSource{countingSource: countingSource{inner: src}, limit: limit}
			m.src, m.limit = ls, ls
			got := make([]float32, T*128)
			if err := m.ForwardRoutedWith(got, x, T, nil, NewWorkspace()); err != nil {
				t.Fatalf("workers %d limit %d: %v", workers, limit, err)
			}
			testkit.RequireSameBits(t, fmt.Sprintf("workers %d limit %d", workers, limit), got, want)
			var fetched []int
			for _, c := range ls.calls {
				fetched = append(fetched, c...)
			}
			if !slices.Equal(fetched, union) {
				t.Fatalf("limit %d: fetched %v, want the union %v once in first-seen order", limit, fetched, union)
			}
			wantCalls := 1
			if limit > 0 {
				wantCalls = (len(union) + limit - 1) / limit
			}
			if len(ls.calls) != wantCalls || ls.released != wantCalls || ls.held != 0 {
				t.Fatalf("limit %d: %d calls, %d releases, %d held; want %d calls", limit, len(ls.calls), ls.released, ls.held, wantCalls)
			}
			if limit > 0 && ls.peak > limit {
				t.Fatalf("limit %d: %d experts held at once", limit, ls.peak)
			}
		}
	}
}

// New picks the limit up from the source.
func TestNewFindsBatchLimiter(t *testing.T) {
	f := opfix.Load(t, "moe")
	m, src := moeFromFixture(t, f, "", 4, 1)
	ls := &limitedSource{countingSource: countingSource{inner: src}, limit: 1}
	w := Weights{Gate: m.router.gate, Bias: m.router.bias, Down: m.down, Up: m.up, Norm: m.norm.Float32(),
		SharedGate: m.shared.gate, SharedUp: m.shared.up, SharedDown: m.shared.down}
	m2, err := New(m.cfg, w, ls)
	if err != nil {
		t.Fatal(err)
	}
	if m2.limit == nil || m2.limit.MaxBatch() != 1 {
		t.Fatal("BatchLimiter not detected")
	}
	in := f.F32("in", 1, 3, 128)
	out := make([]float32, len(in))
	if err := m2.Forward(out, in, 3); err != nil {
		t.Fatal(err)
	}
	for _, c := range ls.calls {
		if len(c) != 1 {
			t.Fatalf("call with %d ids under MaxBatch 1", len(c))
		}
	}
}
