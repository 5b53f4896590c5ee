//go:build amd64 && !purego

package dot

import "testing"

// BenchmarkPairsKernel runs the two-row bf16 kernel (bf16R2Xs4x512) as
// matMulPairs calls it, on one column block of weights and activations that
// stay in L1, one goroutine: the multiply-add rate of the kernel itself, the
// ceiling for BenchmarkMatMulLevel's cases below the packed path (GMAC/s, as
// BenchmarkFMAPeak counts them).
func BenchmarkPairsKernel(b *testing.B) {
	if !useAVX512 {
		b.Skip("CPU lacks AVX-512")
	}
	const m = matMulColBlock
	w := make([]byte, 2*2*m)
	for i := range w {
		w[i] = byte(i * 7)
	}
	x := make([]float64, 4*m)
	for i := range x {
		x[i] = float64(i%5) - 2
	}
	var acc [128]float64
	for b.Loop() {
		bf16R2Xs4x512(&w[0], &w[2*m], &x[0], &x[m], &x[2*m], &x[3*m], m, &acc)
	}
	b.ReportMetric(float64(b.N)*m*8/b.Elapsed().Seconds()/1e9, "GMAC/s")
}
