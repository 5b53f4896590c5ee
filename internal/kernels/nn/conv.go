package nn

import (
	"fmt"

	"github.com/k3-project/k3/internal/kernels/parallel"
)

// ShortConv is a causal depthwise convolution with kernel K over C channels
// followed by SiLU (KDA's q/k/v short convolutions, §4.5 step 2).
//
// The carried state ("tail") of a channel is its last K−1 raw inputs, oldest
// first, laid out [C][K−1]; a fresh sequence starts from zeros. Forgetting to
// carry the tail passes single-call tests and breaks incremental decoding.
type ShortConv struct {
	c, k int
	wt   []float32 // [K][C]: the taps transposed, so a run of channels reads one row per tap
}

// NewShortConv binds the taps w ([C][K] row-major, tap 0 applied to the
// oldest input; the checkpoint's [C,1,K] has the same layout). It keeps a
// transposed copy, not w: at K3's size the taps are most of a model's side
// vectors, and holding both layouts doubled what §8.5 charges as side bytes.
func NewShortConv(channels, kernel int, w []float32) (*ShortConv, error) {
	if channels <= 0 || kernel < 1 {
		return nil, fmt.Errorf("nn: short conv: invalid shape channels=%d kernel=%d", channels, kernel)
	}
	if len(w) != channels*kernel {
		return nil, fmt.Errorf("nn: short conv: %d taps, want channels·kernel = %d·%d = %d", len(w), channels, kernel, channels*kernel)
	}
	wt := make([]float32, len(w))
	for ch := range channels {
		for j := range kernel {
			wt[j*channels+ch] = w[ch*kernel+j]
		}
	}
	return &ShortConv{c: channels, k: kernel, wt: wt}, nil
}

// Channels returns C.
func (s *ShortConv) Channels() int { return s.c }

// Kernel returns K.
func (s *ShortConv) Kernel() int { return s.k }

// TailLen returns the length of the carried state, C·(K−1).
func (s *ShortConv) TailLen() int { return s.c * (s.k - 1) }

// Forward convolves T positions x ([T][C]) into dst ([T][C]) and advances
// tail ([C][K−1]) past them. Per channel, evaluated as §5.3 fixes it:
//
//	acc = w[K−1] ⊗ x_t; for j = 0..K−2: acc = acc ⊕ (w[j] ⊗ hist[j]); y = acc ⊗ σ(acc)
//
// then the history shifts left and x_t is appended. dst may alias x. Calling
// Forward on any split of the positions gives bit-identical results.
func (s *ShortConv) Forward(dst, x, tail []float32, T int) error {
	return s.ForwardParallel(dst, x, tail, T, 1)
}

// ForwardParallel is Forward with the channels split over up to workers
// goroutines (channels are independent, so the result does not depend on
// workers).
func (s *ShortConv) ForwardParallel(dst, x, tail []float32, T, workers int) error {
	return s.ForwardPool(dst, x, tail, T, workers, nil, nil)
}

// ConvCall holds the arguments of one split convolution while its chunks
// run, so that a caller that keeps one (in its per-session scratch) splits
// without allocating. The zero value is ready to use.
type ConvCall struct {
	s            *ShortConv
	dst, x, tail []float32
	T            int
}

// Run convolves channels [lo, hi).
func (c *ConvCall) Run(lo, hi int) { c.s.channels(c.dst, c.x, c.tail, c.T, lo, hi) }

// ForwardPool is ForwardParallel with the split run on pool (nil: goroutines
// per call), its arguments parked in call, which must not be in use by
// another call (nil: a new one, taken only when the channels split).
func (s *ShortConv) ForwardPool(dst, x, tail []float32, T, workers int, pool parallel.Runner, call *ConvCall) error {
	pool = parallel.RunnerOr(pool)
	c, k := s.c, s.k
	if T < 0 || len(x) < T*c || len(dst) < T*c || len(tail) != c*(k-1) {
		return fmt.Errorf("nn: short conv: len(x)=%d len(dst)=%d for T=%d C=%d, len(tail)=%d want %d",
			len(x), len(dst), T, c, len(tail), c*(k-1))
	}
	if parallel.Chunks(c, pool.Limit(workers), 256) <= 1 {
		s.channels(dst, x, tail, T, 0, c)
		return nil
	}
	if call == nil {
		call = new(ConvCall)
	}
	*call = ConvCall{s: s, dst: dst, x: x, tail: tail, T: T}
	pool.Run(c, workers, 256, call)
	*call = ConvCall{} // hold no references to the caller's data
	return nil
}

// channels convolves channels [lo, hi): first every acc (the recurrence
// runs on the inputs, never on y), written over dst, then y = acc ⊗ σ(acc)
// per position over the run of channels, through the vector exp. dst may
// alias x: the inputs are staged before any acc is written.
func (s *ShortConv) channels(dst, x, tail []float32, T, lo, hi int) {
	c, k := s.c, s.k
	m := k - 1
	if m > convHist {
		s.channelsByChannel(dst, x, tail, T, lo, hi)
	} else {
		// convBlock channels at a time, so every read of x and write of dst
		// is a contiguous run (one channel at a time strode a whole row per
		// position). A block's history and up to convRun positions' inputs
		// are staged as consecutive rows of buf (row stride convBlock):
		// position t's taps are rows t..t+m−1, oldest first, and its input
		// row t+m.
		var buf [(convHist + convRun) * convBlock]float32
		row := func(r, nb int) []float32 { return buf[r*convBlock : r*convBlock+nb] }
		for b0 := lo; b0 < hi; b0 += convBlock {
			nb := min(hi, b0+convBlock) - b0
			for j := range m {
				h := row(j, nb)
				for i := range h {
					h[i] = tail[(b0+i)*m+j]
				}
			}
			for t0 := 0; t0 < T; t0 += convRun {
				n := min(convRun, T-t0)
				for t := range n {
					copy(row(m+t, nb), x[(t0+t)*c+b0:])
				}
				if !s.convKernel4(dst[t0*c+b0:], buf[:], n, b0, nb) {
					s.convRows(dst[t0*c+b0:], buf[:], n, b0, nb)
				}
				copy(buf[:m*convBlock], buf[n*convBlock:(n+m)*convBlock]) // the last m rows are the next history
			}
			for j := range m {
				for i, v := range row(j, nb) {
					tail[(b0+i)*m+j] = v
				}
			}
		}
	}
	for t := range T {
		row := dst[t*c+lo : t*c+hi]
		MulSigmoid(row, row, row) // acc ⊗ σ(acc)
	}
}

// convRows computes the accs of n staged positions for the nb channels from
// b0 (see channels) into dst, position t at dst[t·C:].
func (s *ShortConv) convRows(dst, buf []float32, n, b0, nb int) {
	c, m := s.c, s.k-1
	wm := s.wt[m*c+b0 : m*c+b0+nb]
	for t := range n {
		a := dst[t*c : t*c+nb]
		for i, v := range buf[(t+m)*convBlock : (t+m)*convBlock+nb] {
			a[i] = wm[i] * v
		}
		for j := range m {
			h := buf[(t+j)*convBlock : (t+j)*convBlock+nb]
			wj := s.wt[j*c+b0 : j*c+b0+nb]
			for i := range a {
				a[i] = a[i] + float32(wj[i]*h[i])
			}
		}
	}
}

// convBlock is the run of channels channels convolves at once, convHist the
// longest history (kernel − 1) it stages (longer kernels go channel by
// channel) and convRun the positions it stages at a time.
const (
	convBlock = 64
	convHist  = 7
	convRun   = 64
)

// channelsByChannel computes channels' accs one channel at a time (any
// kernel length), writing them over dst.
func (s *ShortConv) channelsByChannel(dst, x, tail []float32, T, lo, hi int) {
	c, m := s.c, s.k-1
	for ch := lo; ch < hi; ch++ {
		hist := tail[ch*m : ch*m+m]
		for t := range T {
			xt := x[t*c+ch]
			acc := s.wt[m*c+ch] * xt
			for j, h := range hist {
				acc = acc + float32(s.wt[j*c+ch]*h)
			}
			dst[t*c+ch] = acc
			if m > 0 {
				copy(hist, hist[1:])
				hist[m-1] = xt
			}
		}
	}
}
