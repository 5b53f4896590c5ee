package moe

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
)

// overlapSource is a limitedSource that overlaps waves, made safe for the
// layer's read-ahead goroutine. The release of a wave that has a successor
// waits (up to a few seconds) for the successor's Experts call, so a layer
// that leased the next wave only after releasing the previous one is
// counted in serial instead of hanging the test.
type overlapSource struct {
	mu sync.Mutex
	limitedSource
	failAt  int           // 1-based call that fails, 0 for none
	waves   int           // calls the layer is expected to make
	called  chan struct{} // one token per call after the first
	serial  int           // releases that saw no successor call
	overlap bool
}

func (s *overlapSource) OverlapWaves() bool { return s.overlap }

var errInjected = errors.New("injected read failure")

func (s *overlapSource) Experts(layer int, ids []int, dst []Expert) ([]Expert, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.calls) + 1
	if n > 1 {
		s.called <- struct{}{}
	}
	if n == s.failAt {
		s.calls = append(s.calls, slices.Clone(ids))
		return nil, nil, fmt.Errorf("expert %d: %w", ids[0], errInjected)
	}
	ex, rel, err := s.limitedSource.Experts(layer, ids, dst)
	if err != nil {
		return nil, nil, err
	}
	return ex, func() {
		if n < s.waves {
			select {
			case <-s.called:
			case <-time.After(3 * time.Second):
				s.mu.Lock()
				s.serial++
				s.mu.Unlock()
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		rel()
	}, nil
}

// With a source that overlaps waves, a layer leases its union in half-waves
// of ⌊MaxBatch/2⌋, each while the previous one is still running: the output
// has the single-wave bits, every expert is fetched once in first-seen
// order, at most MaxBatch experts are leased at once, and every release
// but the last finds the next wave already asked for.
func TestMoEOverlappedWavesBitIdentical(t *testing.T) {
	f := opfix.Load(t, "moe")
	x, want, union := waveInput(t, f)
	for _, workers := range []int{1, 2} {
		for _, limit := range []int{2, 3, 4} {
			name := fmt.Sprintf("workers %d limit %d", workers, limit)
			half := limit / 2
			waves := (len(union) + half - 1) / half
			m, ls := overlapMoE(t, f, workers, limit, waves, 0)
			got := make([]float32, len(want))
			if err := m.ForwardRoutedWith(got, x, len(x)/128, nil, NewWorkspace()); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			testkit.RequireSameBits(t, name, got, want)
			if fetched := slices.Concat(ls.calls...); !slices.Equal(fetched, union) {
				t.Fatalf("%s: fetched %v, want the union %v once in first-seen order", name, fetched, union)
			}
			for _, c := range ls.calls {
				if len(c) > half {
					t.Fatalf("%s: a call of %d experts, want half-waves of at most %d", name, len(c), half)
				}
			}
			if len(ls.calls) != waves || ls.released != waves || ls.held != 0 || ls.peak > limit {
				t.Fatalf("%s: %d calls, %d releases, %d held, peak %d; want %d calls, peak ≤ %d",
					name, len(ls.calls), ls.released, ls.held, ls.peak, waves, limit)
			}
			if ls.serial != 0 {
				t.Fatalf("%s: %d of %d waves were leased only after the previous one was released", name, ls.serial, waves-1)
			}
		}
	}
}

// A failed read-ahead fails the layer with the source's error, after the
// wave that was running is released: nothing stays leased.
func TestMoEOverlappedWaveFailure(t *testing.T) {
	f := opfix.Load(t, "moe")
	x, want, union := waveInput(t, f)
	for _, failAt := range []int{1, 2, len(union)} {
		m, ls := overlapMoE(t, f, 2, 2, failAt, failAt)
		err := m.ForwardRoutedWith(make([]float32, len(want)), x, len(x)/128, nil, NewWorkspace())
		if !errors.Is(err, errInjected) {
			t.Fatalf("fail at call %d: err %v, want the injected failure", failAt, err)
		}
		if len(ls.calls) != failAt || ls.released != failAt-1 || ls.held != 0 {
			t.Fatalf("fail at call %d: %d calls, %d releases, %d held", failAt, len(ls.calls), ls.released, ls.held)
		}
	}
}

// waveInput is TestMoEWavesBitIdentical's nine positions, their single-wave
// output and the union of their picks in first-seen order.
func waveInput(t *testing.T, f *opfix.Fixture) (x, want []float32, union []int) {
	t.Helper()
	in := f.F32("in", 1, 3, 128)
	const T = 9
	x = make([]float32, T*128)
	for tt := range T {
		for i := range 128 {
			x[tt*128+i] = in[(tt%3)*128+i]*float32(1+tt%4)*0.5 - in[((tt+2)%3)*128+i]*0.3
		}
	}
	ref, _ := moeFromFixture(t, f, "", 4, 1)
	want = make([]float32, T*128)
	ids := make([]int, T*2)
	if err := ref.ForwardRouted(want, x, T, ids); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !slices.Contains(union, id) {
			union = append(union, id)
		}
	}
	if len(union) < 3 {
		t.Fatalf("only %d distinct experts: the test needs several half-waves", len(union))
	}
	return x, want, union
}

// overlapMoE binds the fixture layer to an overlapSource as New would.
func overlapMoE(t *testing.T, f *opfix.Fixture, workers, limit, waves, failAt int) (*MoE, *overlapSource) {
	t.Helper()
	m, src := moeFromFixture(t, f, "", 4, workers)
	m.minWork = 1 // split the experts over the workers even on this small layer
	ls := &overlapSource{limitedSource: limitedSource{countingSource: countingSource{inner: src}, limit: limit},
		waves: waves, failAt: failAt, called: make(chan struct{}, waves+1), overlap: true}
	w := Weights{Gate: m.router.gate, Bias: m.router.bias, Down: m.down, Up: m.up, Norm: m.norm.Float32(),
		SharedGate: m.shared.gate, SharedUp: m.shared.up, SharedDown: m.shared.down}
	m2, err := New(m.cfg, w, ls)
	if err != nil {
		t.Fatal(err)
	}
	if !m2.overlap {
		t.Fatal("New did not pick up WaveOverlapper")
	}
	m2.minWork = 1
	return m2, ls
}
