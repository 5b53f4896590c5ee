package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/k3-project/k3/internal/testkit"
)

// K3 shapes [O, I]: a routed expert's w1 and w2, and the largest trunk
// projection.
var benchShapes = []struct {
	name       string
	rows, cols int
}{{"w1_3072x3584", 3072, 3584}, {"w2_3584x3072", 3584, 3072}, {"trunk_12288x7168", 12288, 7168}}

var benchFormats = []fmtCase{{F32, 0}, {BF16, 0}, {F16, 0}, {Int8Row, 0}, {Int4Row, 0}, {Int4Grouped, 32},
	{Int4Grouped, 128}, {FP8E4M3B128, 0}, {MXFP4, 0}}

// benchMatrix builds a matrix from noise bytes with tamed exponents (no NaN
// or Inf weights, no denormals) and realistic scales.
func benchMatrix(b *testing.B, c fmtCase, rows, cols int) (Matrix, int64) {
	nw, _ := WeightBytes(c.f, rows, cols, c.gs)
	ns, _ := ScaleBytes(c.f, rows, cols, c.gs)
	wb := testkit.Filled(int(nw))
	sb := make([]byte, ns)
	switch c.f {
	case F32:
		for i := 3; i < len(wb); i += 4 {
			wb[i] = wb[i]&0x80 | 0x3c
		}
	case BF16:
		for i := 1; i < len(wb); i += 2 {
			wb[i] = wb[i]&0x80 | 0x3c
		}
	case F16:
		for i := 1; i < len(wb); i += 2 {
			wb[i] = wb[i]&0x83 | 0x30
		}
	case FP8E4M3B128:
		for i, v := range wb {
			if v&0x7f == 0x7f {
				wb[i] = 0x3c
			}
		}
	}
	if c.f == MXFP4 {
		for i := range sb {
			sb[i] = byte(120 + i%3)
		}
	} else {
		for i := 0; i < len(sb); i += 4 {
			binary.LittleEndian.PutUint32(sb[i:], math.Float32bits(0.01+float32(i%97)*1e-4))
		}
	}
	m, err := New(c.f, rows, cols, c.gs, wb, sb)
	if err != nil {
		b.Fatal(err)
	}
	return m, nw + ns
}

// BenchmarkMatVec measures each format's MatVec at K3 shapes on 1 and 2
// goroutines, next to a plain read of a buffer of the same size (weights plus
// scales) on as many goroutines: the ratio of the two MB/s figures is the
// kernel's fraction of memory bandwidth.
func BenchmarkMatVec(b *testing.B) {
	for _, sh := range benchShapes {
		for _, c := range benchFormats {
			b.Run(fmt.Sprintf("%s/%v", sh.name, c), func(b *testing.B) {
				m, size := benchMatrix(b, c, sh.rows, sh.cols)
				x := benchInput(sh.cols)
				dst := make([]float32, sh.rows)
				for _, w := range []int{1, 2} {
					b.Run(fmt.Sprintf("kernel/w=%d", w), func(b *testing.B) {
						b.SetBytes(size)
						for b.Loop() {
							MatVecParallel(m, dst, x, w)
						}
					})
					b.Run(fmt.Sprintf("read/w=%d", w), func(b *testing.B) {
						testkit.ReadLoopWorkers(b, testkit.Filled(int(size)), w)
					})
				}
			})
		}
	}
}

// BenchmarkMatMul measures a batch of 8 activation rows on one goroutine
// (bytes = weights + scales per call).
func BenchmarkMatMul8(b *testing.B) {
	sh := benchShapes[0]
	for _, c := range benchFormats {
		b.Run(fmt.Sprintf("%s/%v", sh.name, c), func(b *testing.B) {
			m, size := benchMatrix(b, c, sh.rows, sh.cols)
			const n = 8
			x := make([]float32, n*sh.cols)
			for i := range x {
				x[i] = float32(i%13) * 0.25
			}
			dst := make([]float32, n*sh.rows)
			b.SetBytes(size)
			for b.Loop() {
				m.MatMul(dst, sh.rows, x, n)
			}
		})
	}
}

// BenchmarkRatio interleaves each MatVec with a plain read of a buffer of
// the same size (weights plus scales) on as many goroutines, and reports
// both throughputs and their ratio (kernel/read: the fraction of the
// measured memory bandwidth the kernel reaches). Interleaving pairs every
// kernel run with a read run under the same machine load, which keeps the
// ratio meaningful on a shared machine where either figure alone is not.
func BenchmarkRatio(b *testing.B) {
	for _, sh := range benchShapes {
		for _, c := range benchFormats {
			b.Run(fmt.Sprintf("%s/%v", sh.name, c), func(b *testing.B) {
				m, size := benchMatrix(b, c, sh.rows, sh.cols)
				buf := testkit.Filled(int(size))
				x := benchInput(sh.cols)
				dst := make([]float32, sh.rows)
				for _, w := range []int{1, 2} {
					b.Run(fmt.Sprintf("w=%d", w), func(b *testing.B) {
						var tk, tr time.Duration
						var sink uint64
						iters := 0
						for b.Loop() {
							t0 := time.Now()
							MatVecParallel(m, dst, x, w)
							t1 := time.Now()
							sink ^= testkit.SumParallel(buf, w)
							tr += time.Since(t1)
							tk += t1.Sub(t0)
							iters++
						}
						runtime.KeepAlive(sink)
						mb := float64(size) * float64(iters) / 1e6
						b.ReportMetric(mb/tk.Seconds(), "kernel-MB/s")
						b.ReportMetric(mb/tr.Seconds(), "read-MB/s")
						b.ReportMetric(tr.Seconds()/tk.Seconds(), "kernel/read")
					})
				}
			})
		}
	}
}

// benchInput is the benchmarks' activation vector: small exact values, the
// same every run.
func benchInput(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%13) * 0.25
	}
	return x
}
