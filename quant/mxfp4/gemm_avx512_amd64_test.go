//go:build amd64 && !purego

package mxfp4

import "testing"

// BenchmarkGemmKernel runs the packed mat-mul's kernels alone over one panel
// of eight weight rows and gemmGroups groups (in L1, as in a prefill) for six
// activation rows: gemm8x6 once against gemm8x3 twice, in one run; GMAC/s
// counts the multiply-adds of the products.
func BenchmarkGemmKernel(b *testing.B) {
	if !haveAVX512 {
		b.Skip("CPU lacks AVX-512")
	}
	const gc, cols = gemmGroups, 1024
	panel := make([]float64, 8*gc*GroupSize)
	for i := range panel {
		panel[i] = float64(i%7) - 3
	}
	xw := make([]float64, 6*cols)
	for i := range xw {
		xw[i] = float64(i%5) - 2
	}
	sc := make([]float64, 8*gc)
	for i := range sc {
		sc[i] = 1
	}
	sums := make([]float64, 48)
	dst := make([]float32, 48)
	macs := func(b *testing.B) {
		b.ReportMetric(float64(b.N)*float64(8*gc*GroupSize*6)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	}
	b.Run("rows6", func(b *testing.B) {
		for b.Loop() {
			gemm8x6(&dst[0], 32, &panel[0], &xw[0], 8*cols, &sc[0], &sums[0], gc, false, false)
		}
		macs(b)
	})
	b.Run("rows3x2", func(b *testing.B) {
		for b.Loop() {
			gemm8x3(&dst[0], 32, &panel[0], &xw[0], &xw[cols], &xw[2*cols], &sc[0], &sums[0], gc, 3, false, false)
			gemm8x3(&dst[0], 32, &panel[0], &xw[3*cols], &xw[4*cols], &xw[5*cols], &sc[0], &sums[24], gc, 3, false, false)
		}
		macs(b)
	})
}
