//go:build amd64 && !purego

package dot

import (
	"fmt"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// benchLevels are the kernel levels of each format, widest first, plus the
// pure-Go twin, so one run compares them on the same machine load.
func benchLevels(f benchFormat) []struct {
	name   string
	ok     bool
	matVec func(dst []float32, w []byte, x []float32)
	matMul func(dst []float32, stride int, w []byte, x []float32, n int)
} {
	type level = struct {
		name   string
		ok     bool
		matVec func(dst []float32, w []byte, x []float32)
		matMul func(dst []float32, stride int, w []byte, x []float32, n int)
	}
	var a512, a2 *asmFormat
	var gen func([]byte, []float32) float32
	ok512, ok2 := useAVX512, useAVX2
	switch f.name {
	case "bf16":
		a512, a2, gen = fmtBF16x512, fmtBF16, genericBF16
	case "f32":
		a512, a2, gen = fmtF32x512, fmtF32, genericF32
	default:
		a512, a2, gen = fmtF16x512, fmtF16, genericF16
		ok512, ok2 = useAVX512 && useF16C, useF16C
	}
	asm := func(af *asmFormat, ok bool) level {
		return level{af.name[len(f.name)+1:], ok,
			func(dst []float32, w []byte, x []float32) { asmMatVec(af, dst, w, x) },
			func(dst []float32, stride int, w []byte, x []float32, n int) {
				asmMatMul(af, dst, stride, w, x, n, len(w)/(f.size*(len(x)/n)), len(x)/n)
			}}
	}
	// The AVX-512 kernels without the packed mat-mul: the per-pass kernels
	// over any number of activation rows, for comparison in the same run.
	passes := *a512
	passes.name, passes.panel = a512.name+"-passes", nil
	return []level{asm(a512, ok512), asm(&passes, ok512), asm(a2, ok2), {"go", true,
		func(dst []float32, w []byte, x []float32) { genericMatVec(gen, f.size, dst, w, x) },
		func(dst []float32, stride int, w []byte, x []float32, n int) {
			cols := len(x) / n
			genericMatMul(gen, f.size, dst, stride, w, x, n, len(w)/(f.size*cols), cols)
		}}}
}

// BenchmarkMatVecLevel forces each kernel level on the 12288×7168 trunk
// shape (one goroutine, paired with the read loop: x-read is the fraction of
// one core's read bandwidth the kernel reaches) and 16 distinct expert-sized
// matrices per iteration (weights from DRAM).
func BenchmarkMatVecLevel(b *testing.B) {
	for _, f := range benchFormats {
		const rows, cols = 12288, 7168
		w := lazyWeights(f, rows*cols, uint64(rows*cols))
		x := benchX(cols)
		dst := make([]float32, rows)
		for _, lv := range benchLevels(f) {
			b.Run(fmt.Sprintf("%s/%s/%dx%d", f.name, lv.name, rows, cols), func(b *testing.B) {
				if !lv.ok {
					b.Skip("CPU lacks the features")
				}
				w := w()
				testkit.Paired(b, w, 1, func() { lv.matVec(dst, w, x) })
			})
		}
	}
}

// BenchmarkMatMulLevel is BenchmarkMatMul with the level forced;
// "avx512-passes" is the AVX-512 level without the packed mat-mul.
func BenchmarkMatMulLevel(b *testing.B) {
	f := benchFormats[0]
	const rows, cols = 3072, 3584
	lw := lazyWeights(f, rows*cols, 7)
	for _, lv := range benchLevels(f) {
		for _, n := range []int{2, 3, 4, 6, 8, 16, 32, 64, 128, 256, 512} {
			b.Run(fmt.Sprintf("%s/%s/%dx%d/n%d", f.name, lv.name, rows, cols, n), func(b *testing.B) {
				if !lv.ok {
					b.Skip("CPU lacks the features")
				}
				w, x, dst := lw(), benchX(n*cols), make([]float32, n*rows)
				testkit.Paired(b, w, 1, func() { lv.matMul(dst, rows, w, x, n) })
				// Multiply-adds per second of kernel time, as BenchmarkFMAPeak counts them.
				b.ReportMetric(float64(rows*cols*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}

// BenchmarkFMAPeak is the core's float64 multiply-add ceiling at each level,
// one goroutine: sixteen independent zmm FMAs on registers per round
// (avx512), twelve ymm ones (avx2) (GMAC/s, as BenchmarkGemmKernel and
// BenchmarkMatMulLevel count them).
func BenchmarkFMAPeak(b *testing.B) {
	const n = 1 << 14
	for _, lv := range []struct {
		name  string
		ok    bool
		run   func(int)
		lanes int // multiply-adds a round
	}{{"avx512", useAVX512, fmaPeak, 16 * 8}, {"avx2", useAVX2, fmaPeakAVX2, 12 * 4}} {
		b.Run(lv.name, func(b *testing.B) {
			if !lv.ok {
				b.Skip("CPU lacks the features")
			}
			for b.Loop() {
				lv.run(n)
			}
			b.ReportMetric(float64(b.N)*n*float64(lv.lanes)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

// BenchmarkGemmKernel runs the packed mat-mul's inner kernel (gemm4x6) on a
// panel and activations that stay in L1 and L2, one goroutine: the
// multiply-add rate the kernel reaches when memory is not in the way, the
// ceiling for BenchmarkMatMulLevel's packed cases (GMAC/s, float64 FMAs × 8).
func BenchmarkGemmKernel(b *testing.B) {
	if !useAVX512 {
		b.Skip("CPU lacks AVX-512")
	}
	const steps, blocks = 32, 16 // a 512-column chunk, 64 weight rows
	w := make([]float64, blocks*steps*32)
	x := make([]float64, 6*steps*8)
	st := make([]float64, blocks*192)
	for i := range w {
		w[i] = float64(i%7) - 3
	}
	for i := range x {
		x[i] = float64(i%5) - 2
	}
	for b.Loop() {
		gemm4x6(&w[0], steps*256, &x[0], steps*64, steps, &st[0], blocks, false, &x[0], 1)
	}
	macs := float64(b.N) * blocks * steps * 24 * 8
	b.ReportMetric(macs/b.Elapsed().Seconds()/1e9, "GMAC/s")
}

// BenchmarkGemmPanel widens a 64-row bf16 group of 2048 columns into the
// packed mat-mul's panel (1 MiB, as in a prefill of the perf model) one row
// per call ("row", the path of partial blocks) and four rows per call
// ("x4"), the weights hot; GB/s of weights.
func BenchmarkGemmPanel(b *testing.B) {
	if !useAVX512 {
		b.Skip("CPU lacks AVX-512")
	}
	const rows, m = 64, 2048
	w := make([]byte, 2*rows*m)
	for i := range w {
		w[i] = byte(i)
	}
	panel := make([]float64, rows*m)
	for _, x4 := range []bool{false, true} {
		b.Run(map[bool]string{false: "row", true: "x4"}[x4], func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				for r := 0; r < rows; {
					p := panel[r/4*4*m+r%4*8:]
					for k := 0; k < m; k += gemmChunk {
						if x4 {
							bf16Panel512x4(&p[4*k], &w[2*(r*m+k)], 2*m, gemmChunk, 16*gemmChunk)
						} else {
							bf16Panel512(&p[4*k], &w[2*(r*m+k)], gemmChunk, 16*gemmChunk)
						}
					}
					r += map[bool]int{false: 1, true: 4}[x4]
				}
			}
		})
	}
}

// BenchmarkGemmStore reduces and stores one group's state (64 rows, six
// positions) with the four-row BF16 store ("rows4", the path of a leftover
// block) and the eight-row one ("rows8").
func BenchmarkGemmStore(b *testing.B) {
	if !useAVX512 {
		b.Skip("CPU lacks AVX-512")
	}
	const nb = 16
	st := make([]float64, 2*nb*192)
	for i := range st {
		st[i] = float64(i%9) - 4
	}
	dst := make([]float32, 6*4*nb)
	hi := 8 * 8 * 24 * nb
	b.Run("rows4", func(b *testing.B) {
		for b.Loop() {
			gemmStoreBF16(&dst[0], 4*4*nb, &st[0], nb, 6, hi)
		}
	})
	b.Run("rows8", func(b *testing.B) {
		for b.Loop() {
			gemmStore8BF16(&dst[0], 4*4*nb, &st[0], nb/2, 6, hi)
		}
	})
}
