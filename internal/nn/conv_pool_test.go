package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/parallel"
	"github.com/k3-project/k3/internal/testkit"
)

// ForwardPool splits the channels of a layer wide enough to split (two
// chunks of 256 and more) on a pool: the same bits as Forward, and with a
// reused ConvCall a decode step allocates nothing.
func TestShortConvPool(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const C, K, T = 1100, 4, 3
	w := make([]float32, C*K)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.5)
	}
	s, err := NewShortConv(C, K, w)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, T*C)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	pool := parallel.NewPool(2)
	defer pool.Close()
	want, got := make([]float32, T*C), make([]float32, T*C)
	tailW, tailG := make([]float32, s.TailLen()), make([]float32, s.TailLen())
	var call ConvCall
	for step := range 2 {
		if err := s.Forward(want, x, tailW, T); err != nil {
			t.Fatal(err)
		}
		if err := s.ForwardPool(got, x, tailG, T, 2, pool, &call); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("step %d: output %d: %v, want %v", step, i, got[i], want[i])
			}
		}
		for i := range tailW {
			if math.Float32bits(tailG[i]) != math.Float32bits(tailW[i]) {
				t.Fatalf("step %d: tail %d differs", step, i)
			}
		}
	}
	if testkit.RaceEnabled {
		return
	}
	if n := testing.AllocsPerRun(20, func() { _ = s.ForwardPool(got[:C], x[:C], tailG, 1, 2, pool, &call) }); n != 0 {
		t.Errorf("split decode step: %v allocations", n)
	}
}

// Forward, which takes no ConvCall, allocates nothing on a layer too narrow
// to split.
func TestShortConvForwardAllocatesNothing(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	s, err := NewShortConv(64, 4, make([]float32, 64*4))
	if err != nil {
		t.Fatal(err)
	}
	x, tail := make([]float32, 64), make([]float32, s.TailLen())
	if n := testing.AllocsPerRun(20, func() { _ = s.Forward(x, x, tail, 1) }); n != 0 {
		t.Errorf("Forward: %v allocations", n)
	}
}
