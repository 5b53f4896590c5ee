package lossless12

import (
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/dot"
	"github.com/k3-project/k3/internal/testkit"
)

// BenchmarkMatVec compares a mat-vec over a K3-wide matrix (2048 × 7168,
// 29 MB in bf16, beyond the caches) in bf16 and in lossless12; bytes/s is
// of the bf16 size in both, so the figures compare as weights per second.
func BenchmarkMatVec(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 2048, 7168
	w := gaussianBF16(r, rows, cols, 0.02)
	m := mustOpen(b, rows, cols, w)
	x := testkit.Gaussian(r, cols, 1)
	dst := make([]float32, rows)
	b.Run("bf16", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for b.Loop() {
			dot.MatVecBF16(dst, w, x)
		}
	})
	b.Run("lossless12", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for b.Loop() {
			m.MatVec(dst, x)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		row := make([]byte, 2*cols)
		for b.Loop() {
			for i := range rows {
				m.decodeRow(row, i)
			}
		}
	})
}
