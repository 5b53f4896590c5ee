package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
)

func TestShortConvErrors(t *testing.T) {
	if _, err := NewShortConv(4, 3, make([]float32, 11)); err == nil {
		t.Error("wrong tap count accepted")
	}
	if _, err := NewShortConv(0, 3, nil); err == nil {
		t.Error("zero channels accepted")
	}
	c, err := NewShortConv(4, 3, make([]float32, 12))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Forward(make([]float32, 8), make([]float32, 8), make([]float32, 7), 2); err == nil {
		t.Error("wrong tail length accepted")
	}
	if err := c.Forward(make([]float32, 8), make([]float32, 4), make([]float32, 8), 2); err == nil {
		t.Error("short input accepted")
	}
}

// Splitting a sequence across calls must give the same bits (the tail is
// the only carried state).
func TestShortConvChunking(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const C, K, T = 6, 4, 9
	w := testkit.Gaussian(r, C*K, 1)
	x := testkit.Gaussian(r, T*C, 1)
	c, _ := NewShortConv(C, K, w)
	ref := make([]float32, T*C)
	tail := make([]float32, c.TailLen())
	_ = c.Forward(ref, x, tail, T)
	got := make([]float32, T*C)
	tail2 := make([]float32, c.TailLen())
	pos := 0
	for _, n := range []int{2, 1, 4, 2} {
		_ = c.Forward(got[pos*C:(pos+n)*C], x[pos*C:(pos+n)*C], tail2, n)
		pos += n
	}
	for i := range ref {
		if math.Float32bits(ref[i]) != math.Float32bits(got[i]) {
			t.Fatalf("chunked conv differs at %d", i)
		}
	}
	for i := range tail {
		if tail[i] != tail2[i] {
			t.Fatalf("tails differ at %d", i)
		}
	}
	// In-place operation (dst aliasing x) is allowed.
	inPlace := append([]float32(nil), x...)
	clear(tail2)
	_ = c.Forward(inPlace, inPlace, tail2, T)
	for i := range ref {
		if math.Float32bits(ref[i]) != math.Float32bits(inPlace[i]) {
			t.Fatalf("in-place conv differs at %d", i)
		}
	}
}

// TestShortConvBlocks holds the blocked convolution (runs of convBlock
// channels, history and inputs staged as rows) to the channel-by-channel statement,
// bit for bit, for kernels with and without a history, channel counts that
// leave a partial block, several calls carrying the tail, calls longer than
// the vector path's staged run of positions, and dst aliasing x.
func TestShortConvBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	vec := func(n int) []float32 { return testkit.Gaussian(r, n, 1) }
	for _, k := range []int{1, 2, 4, 8, 9} { // 9: past convHist, channel by channel
		for _, c := range []int{1, 63, 64, 130} {
			s, err := NewShortConv(c, k, vec(c*k))
			if err != nil {
				t.Fatal(err)
			}
			tailA, tailB := vec(c*(k-1)), []float32(nil)
			tailB = append(tailB, tailA...)
			for call, T := range []int{1, 5, 2, 9, 70, 131} { // past convRun: several staged runs
				x := vec(T * c)
				want := make([]float32, T*c)
				s.channelsByChannel(want, x, tailB, T, 0, c)
				for tt := range T {
					row := want[tt*c : (tt+1)*c]
					MulSigmoid(row, row, row)
				}
				got := append([]float32(nil), x...)
				s.channels(got, got, tailA, T, 0, c) // in place
				testkit.RequireSameBits(t, fmt.Sprintf("k=%d c=%d call %d: y", k, c, call), got, want)
				testkit.RequireSameBits(t, fmt.Sprintf("k=%d c=%d call %d: tail", k, c, call), tailA, tailB)
			}
		}
	}
}

// ForwardPool splits the channels of a layer wide enough to split (two
// chunks of 256 and more) on a pool: the same bits as Forward, and with a
// reused ConvCall a decode step allocates nothing.
func TestShortConvPool(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const C, K, T = 1100, 4, 3
	w := testkit.Gaussian(r, C*K, 0.5)
	s, err := NewShortConv(C, K, w)
	if err != nil {
		t.Fatal(err)
	}
	x := testkit.Gaussian(r, T*C, 1)
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
		testkit.RequireSameBits(t, fmt.Sprintf("step %d: output", step), got, want)
		testkit.RequireSameBits(t, fmt.Sprintf("step %d: tail", step), tailG, tailW)
	}
	if testkit.RaceEnabled {
		return
	}
	testkit.NoAllocs(t, "split decode step", 20, func() { _ = s.ForwardPool(got[:C], x[:C], tailG, 1, 2, pool, &call) })
}
