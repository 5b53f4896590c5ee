package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// BenchmarkShortConv: one KDA short convolution of the perf geometry (2048
// channels, kernel 4) over a 256-position prefill, in place: "blocked" is
// channels (runs of convBlock channels position by position), "by-channel"
// the channel-at-a-time statement it replaced, both followed by the SiLU.
func BenchmarkShortConv(b *testing.B) {
	const c, k, T = 2048, 4, 256
	r := rand.New(rand.NewPCG(1, 2))
	w := testkit.Gaussian(r, c*k, 0.3)
	s, err := NewShortConv(c, k, w)
	if err != nil {
		b.Fatal(err)
	}
	x := testkit.Gaussian(r, T*c, 1)
	y := make([]float32, T*c)
	tail := make([]float32, c*(k-1))
	b.Run("blocked", func(b *testing.B) {
		b.SetBytes(int64(4 * len(x)))
		for b.Loop() {
			copy(y, x)
			s.channels(y, y, tail, T, 0, c)
		}
	})
	b.Run("by-channel", func(b *testing.B) {
		b.SetBytes(int64(4 * len(x)))
		for b.Loop() {
			copy(y, x)
			s.channelsByChannel(y, y, tail, T, 0, c)
			for t := range T {
				row := y[t*c : (t+1)*c]
				MulSigmoid(row, row, row)
			}
		}
	})
}
