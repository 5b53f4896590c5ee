package mxfp4

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
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

// coldExperts is the number of distinct w1-sized experts BenchmarkMatVecCold
// cycles through: 96 × 5.6 MiB ≈ 536 MiB, twice the 260 MiB L3 of the
// development and CI machines, so every expert comes from DRAM, as routed
// experts do during decoding.
const coldExperts = 96

// benchKernels returns the assembly kernels runnable here (each forced, so a
// run compares them), or the pure-Go twin when there is none.
func benchKernels() []string {
	names := make([]string, 0, 2)
	for name := range asmKernels() {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		names = append(names, "generic")
	}
	return names
}

func benchKernel(name string) kernel {
	if k, ok := asmKernels()[name]; ok {
		return k
	}
	return genericKernel
}

// matVecRows is MatVec through kernel k with the rows split over workers
// goroutines (internal/kernels/parallel, as quant does); each part widens x itself,
// as MatVec does.
func matVecRows(k kernel, workers int, dst []float32, packed, scales []byte, x []float32) {
	cols := len(x)
	parallel.For(len(dst), workers, 64, func(lo, hi int) {
		p, s, _ := RowRange(packed, scales, cols, lo, hi)
		runMatVec(k, dst[lo:hi], p, s, x)
	})
}

// BenchmarkMatVec multiplies the same matrix every iteration, alternated
// with a read of an equally large buffer; see pairedRun for the metrics. w1
// and w2 (5.6 MiB each, plus the buffer) stay in cache, so this is the
// cache-resident case; the big matrix (44 MiB plus the buffer) does not on
// the development machine (its read loop runs at DRAM speed there).
func BenchmarkMatVec(b *testing.B) {
	for _, sh := range benchShapes {
		rng := rand.New(rand.NewPCG(1, uint64(sh.rows)))
		packed, scales := randMatrix(rng, sh.rows, sh.cols, 119, 123, false)
		x := randVec(rng, sh.cols)
		dst := make([]float32, sh.rows)
		size := len(packed) + len(scales)
		buf := testkit.Filled(size)
		for _, workers := range []int{1, 2} {
			for _, name := range benchKernels() {
				k := benchKernel(name)
				b.Run(fmt.Sprintf("%s/g%d/kernel=%s", sh.name, workers, name), func(b *testing.B) {
					pairedRun(b, int64(size), workers,
						func(int) { matVecRows(k, workers, dst, packed, scales, x) },
						func(int) uint64 { return testkit.SumParallel(buf, workers) })
				})
			}
		}
	}
}

// BenchmarkMatVecCold is the DRAM-streaming case: iteration i multiplies
// expert i mod coldExperts (w1 shape) and then reads part i mod coldExperts
// of a separate buffer of the same total size, so neither finds its bytes in
// cache.
func BenchmarkMatVecCold(b *testing.B) {
	rows, cols := 3072, 3584
	pb, sb := rows*cols/2, rows*cols/GroupSize
	packed := testkit.Filled(coldExperts * pb)
	scales := make([]byte, coldExperts*sb)
	for i := range scales {
		scales[i] = byte(119 + i%5)
	}
	size := pb + sb
	buf := testkit.Filled(coldExperts * size)
	x := randVec(rand.New(rand.NewPCG(5, 6)), cols)
	dst := make([]float32, rows)
	for _, workers := range []int{1, 2} {
		for _, name := range benchKernels() {
			k := benchKernel(name)
			b.Run(fmt.Sprintf("w1x%d/g%d/kernel=%s", coldExperts, workers, name), func(b *testing.B) {
				pairedRun(b, int64(size), workers,
					func(i int) {
						e := i % coldExperts
						matVecRows(k, workers, dst, packed[e*pb:(e+1)*pb], scales[e*sb:(e+1)*sb], x)
					},
					func(i int) uint64 {
						e := i % coldExperts
						return testkit.SumParallel(buf[e*size:(e+1)*size], workers)
					})
			})
		}
	}
}

// pairedRun alternates kernel(i) and read(i) for i = 0, 1, ... and times
// each separately, so both see the same machine load (it drifts on a shared
// machine). Both process size bytes per call. It reports MB/s of the kernel
// ("kern-MB/s"), of the read loop ("read-MB/s") and their ratio ("x-read");
// on one goroutine (pinned to its thread) also the ratio of bytes per
// second of the thread's own CPU time ("x-readcpu"), which other processes
// on the machine do not distort.
func pairedRun(b *testing.B, size int64, workers int, kernel func(i int), read func(i int) uint64) {
	if workers == 1 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	var kWall, rWall, kCPU, rCPU time.Duration
	var sink uint64
	cpuOK := workers == 1
	n := 0
	for b.Loop() {
		c0, ok0 := threadCPU()
		t0 := time.Now()
		kernel(n)
		t1 := time.Now()
		c1, ok1 := threadCPU()
		sink ^= read(n)
		t2 := time.Now()
		c2, ok2 := threadCPU()
		kWall += t1.Sub(t0)
		rWall += t2.Sub(t1)
		kCPU += c1 - c0
		rCPU += c2 - c1
		cpuOK = cpuOK && ok0 && ok1 && ok2
		n++
	}
	runtime.KeepAlive(sink)
	if kWall <= 0 || rWall <= 0 {
		return
	}
	mbs := func(d time.Duration) float64 { return float64(size) * float64(n) / d.Seconds() / 1e6 }
	b.ReportMetric(mbs(kWall), "kern-MB/s")
	b.ReportMetric(mbs(rWall), "read-MB/s")
	b.ReportMetric(rWall.Seconds()/kWall.Seconds(), "x-read")
	if cpuOK && kCPU > 0 && rCPU > 0 {
		b.ReportMetric(rCPU.Seconds()/kCPU.Seconds(), "x-readcpu")
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

// BenchmarkMatMul multiplies 8 activation rows (a prefill chunk) by w1 with
// each kernel.
// BenchmarkMatMul: the batched product per kernel and shape: 3072×3584
// over 8 rows, and the perf checkpoint's expert shapes over 4, 8 and 32
// rows (its 256-token prefill sends 1 to 135 positions to an expert, 32 on
// average). For the AVX-512 kernel, "avx512-4row" is the same kernel
// without the packed form (gemmAVX512) and "avx512-2row" also without the
// four-row pass, so one run gives each one's gain; "avx2-1row" is the AVX2
// kernel without its two-row pass.
func BenchmarkMatMul(b *testing.B) {
	for _, sh := range [][3]int{{3072, 3584, 8}, {512, 1024, 4}, {512, 1024, 8}, {512, 1024, 32}, {1024, 512, 32}, {512, 2048, 32}} {
		rows, cols, n := sh[0], sh[1], sh[2]
		rng := rand.New(rand.NewPCG(3, 4))
		packed, scales := randMatrix(rng, rows, cols, 119, 123, false)
		x := randVec(rng, n*cols)
		dst := make([]float32, n*rows)
		size := int64(n * (len(packed) + len(scales)))
		kernels := map[string]kernel{}
		for _, name := range benchKernels() {
			kernels[name] = benchKernel(name)
		}
		if k, ok := kernels["avx2"]; ok {
			k.rows2 = nil
			kernels["avx2-1row"] = k
		}
		if k, ok := kernels["avx512"]; ok {
			k.gemm = nil
			kernels["avx512-4row"] = k
			k.rows4 = nil
			kernels["avx512-2row"] = k
		}
		for _, name := range slices.Sorted(maps.Keys(kernels)) {
			k := kernels[name]
			b.Run(fmt.Sprintf("%dx%d/n%d/kernel=%s", rows, cols, n, name), func(b *testing.B) {
				b.SetBytes(size)
				cpuTimed(b, true, size, func() { matMul(k, dst, rows, packed, scales, x, n, rows, cols) })
			})
		}
	}
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
