package mxfp4

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/k3-project/k3/internal/benchutil"
	"github.com/k3-project/k3/internal/parallel"
)

// benchShapes are K3 routed-expert shapes ([rows, cols]): w1/w3 and w2 of
// one expert, and a large projection-sized matrix.
var benchShapes = []struct {
	name       string
	rows, cols int
}{
	{"w1_3072x3584", 3072, 3584},
	{"w2_3584x3072", 3584, 3072},
	{"big_12288x7168", 12288, 7168},
}

// BenchmarkMatVec reports MB/s of packed+scale bytes next to a plain read of
// a buffer of the same size (internal/benchutil), for 1 and 2 goroutines
// (rows split with internal/parallel, as quant does). On one goroutine both
// the kernel ("mxfp4") and the same read loop ("readcpu") also report
// cpuMB/s: bytes per second of the thread's own CPU time, a ratio that other
// load on a shared machine does not distort.
func BenchmarkMatVec(b *testing.B) {
	for _, sh := range benchShapes {
		rng := rand.New(rand.NewPCG(1, uint64(sh.rows)))
		packed, scales := randMatrix(rng, sh.rows, sh.cols, 119, 123, false)
		x := randVec(rng, sh.cols)
		dst := make([]float32, sh.rows)
		size := int64(len(packed) + len(scales))
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/g%d/mxfp4", sh.name, workers), func(b *testing.B) {
				b.SetBytes(size)
				cpuTimed(b, workers == 1, size, func() {
					parallel.For(sh.rows, workers, 64, func(lo, hi int) {
						p, s, _ := RowRange(packed, scales, sh.cols, lo, hi)
						MatVec(dst[lo:hi], p, s, x)
					})
				})
			})
			b.Run(fmt.Sprintf("%s/g%d/readloop", sh.name, workers), func(b *testing.B) {
				benchutil.ReadLoopWorkers(b, make([]byte, size), workers)
			})
			if workers == 1 {
				b.Run(fmt.Sprintf("%s/g1/readcpu", sh.name), func(b *testing.B) {
					buf := make([]byte, size)
					b.SetBytes(size)
					var sink uint64
					cpuTimed(b, true, size, func() { sink ^= benchutil.Sum(buf) })
					runtime.KeepAlive(sink)
				})
			}
		}
	}
}

// BenchmarkMatVecGeneric measures the pure-Go twin on the w1 shape.
func BenchmarkMatVecGeneric(b *testing.B) {
	rows, cols := 3072, 3584
	rng := rand.New(rand.NewPCG(1, 2))
	packed, scales := randMatrix(rng, rows, cols, 119, 123, false)
	x := randVec(rng, cols)
	dst := make([]float32, rows)
	size := int64(len(packed) + len(scales))
	b.SetBytes(size)
	cpuTimed(b, true, size, func() { runMatVec(genericKernel, dst, packed, scales, x) })
}

// BenchmarkMatMul multiplies 8 activation rows (a prefill chunk) by w1.
func BenchmarkMatMul(b *testing.B) {
	rows, cols, n := 3072, 3584, 8
	rng := rand.New(rand.NewPCG(3, 4))
	packed, scales := randMatrix(rng, rows, cols, 119, 123, false)
	x := randVec(rng, n*cols)
	dst := make([]float32, n*rows)
	size := int64(n * (len(packed) + len(scales)))
	b.SetBytes(size)
	cpuTimed(b, true, size, func() {
		if _, err := MatMul(dst, rows, packed, scales, x, n, rows, cols); err != nil {
			b.Fatal(err)
		}
	})
}

// cpuTimed runs f in the benchmark loop; with perCPU it pins the goroutine to
// its thread and reports size bytes per iteration over the thread's CPU time.
func cpuTimed(b *testing.B, perCPU bool, size int64, f func()) {
	if perCPU {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	t0, ok := threadCPU()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if t1, ok1 := threadCPU(); perCPU && ok && ok1 && t1 > t0 {
		b.ReportMetric(float64(size)*float64(n)/(t1-t0).Seconds()/1e6, "cpuMB/s")
	}
}
