package quant_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/lossless12"
)

// BenchmarkLossless12Stream compares bf16 and lossless12 mat-vecs over a
// matrix far larger than the caches (12288 × 7168, 176 MB in bf16, 134 MB
// in lossless12), where a mat-vec is bound by memory bandwidth, on one and
// two workers. bytes/s is of the bf16 size in both, so the figures compare
// as weights per second.
func BenchmarkLossless12Stream(b *testing.B) {
	const rows, cols = 12288, 7168
	r := rand.New(rand.NewPCG(27, 7))
	w := randBF16(r, rows, cols)
	enc, err := lossless12.Encode(rows, cols, w)
	if err != nil {
		b.Fatal(err)
	}
	bf, err := quant.NewBF16(rows, cols, w)
	if err != nil {
		b.Fatal(err)
	}
	h, _ := lossless12.ParseHeader(enc)
	ll, err := quant.New(quant.Lossless12, rows, cols, h.Escapes, enc, nil)
	if err != nil {
		b.Fatal(err)
	}
	x := testkit.Gaussian(r, cols, 1)
	dst := make([]float32, rows)
	p := parallel.NewPool(2)
	defer p.Close()
	for _, workers := range []int{1, 2} {
		for _, m := range []quant.Matrix{bf, ll} {
			b.Run(fmt.Sprintf("%v/w%d", m.Format(), workers), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					quant.MatVecOn(p, m, dst, x, workers)
				}
			})
		}
	}
}
