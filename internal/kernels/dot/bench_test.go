package dot

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
)

// Benchmarks at the K3 shapes (§3.5): the trunk projections
// [12288, 7168] and [7168, 12288], and an expert-sized [3072, 3584]. Each
// kernel benchmark reports weight bytes per second and is paired with a
// "read" benchmark over the same weight buffer on the same number of
// goroutines, so kernel/read is the fraction of the memory bandwidth the
// kernel reaches in this run.

var benchShapes = [][2]int{{12288, 7168}, {7168, 12288}, {3072, 3584}}

type benchFormat struct {
	name   string
	size   int
	fill   func(buf []byte, seed uint64)
	matVec func(dst []float32, w []byte, x []float32)
	matMul func(dst []float32, stride int, w []byte, x []float32, n int)
}

var benchFormats = []benchFormat{
	{"bf16", 2, fillBF16, MatVecBF16, MatMulBF16},
	{"f32", 4, fillF32, MatVecF32, MatMulF32},
	{"f16", 2, fillF16, MatVecF16, MatMulF16},
}

// fill* write finite values of moderate magnitude (random sign and
// mantissa, exponent within ±7) so no NaN/Inf path is timed.
func xorshift(s uint64) uint64 {
	s ^= s << 13
	s ^= s >> 7
	s ^= s << 17
	return s
}

func fillBF16(buf []byte, seed uint64) {
	for i := 0; i+2 <= len(buf); i += 2 {
		seed = xorshift(seed)
		h := uint16(seed&0x807f) | uint16(120+seed>>8%15)<<7
		binary.LittleEndian.PutUint16(buf[i:], h)
	}
}

func fillF16(buf []byte, seed uint64) {
	for i := 0; i+2 <= len(buf); i += 2 {
		seed = xorshift(seed)
		h := uint16(seed&0x83ff) | uint16(8+seed>>16%15)<<10
		binary.LittleEndian.PutUint16(buf[i:], h)
	}
}

func fillF32(buf []byte, seed uint64) {
	for i := 0; i+4 <= len(buf); i += 4 {
		seed = xorshift(seed)
		v := uint32(seed&0x807fffff) | uint32(120+seed>>32%15)<<23
		binary.LittleEndian.PutUint32(buf[i:], v)
	}
}

func benchX(n int) []float32 {
	x := make([]float32, n)
	s := uint64(99)
	for i := range x {
		s = xorshift(s)
		x[i] = float32(math.Ldexp(float64(s>>40)/(1<<24)+0.5, int(s%9)-4))
	}
	return x
}

// lazyWeights returns a function that allocates and fills n weights of f
// on first call (only when a sub-benchmark using them is selected by -bench)
// and returns the same buffer afterwards.
func lazyWeights(f benchFormat, n int, seed uint64) func() []byte {
	var w []byte
	return func() []byte {
		if w == nil {
			w = make([]byte, n*f.size)
			f.fill(w, seed)
		}
		return w
	}
}

// rowSplit runs a mat-vec on workers goroutines over contiguous row ranges,
// the way quant.MatVecParallel does.
func rowSplit(workers int, matVec func([]float32, []byte, []float32), dst []float32, w []byte, x []float32) {
	rb := len(w) / len(dst)
	parallel.For(len(dst), workers, 64, func(lo, hi int) {
		matVec(dst[lo:hi], w[lo*rb:hi*rb], x)
	})
}

// BenchmarkMatVec reports, per format, shape and goroutine count, the
// kernel's weight bandwidth (MB/s), a plain read loop's bandwidth over the
// same buffer measured in alternation (read-MB/s) and their ratio (x-read).
// The ring variant applies 16 distinct expert-sized matrices per iteration,
// so, like a streamed expert, the weights come from DRAM rather than from
// the 260 MB last-level cache that a single 22 MB expert would fit in.
func BenchmarkMatVec(b *testing.B) {
	for _, f := range benchFormats {
		for _, sh := range benchShapes {
			rows, cols := sh[0], sh[1]
			w := lazyWeights(f, rows*cols, uint64(rows*cols))
			x := benchX(cols)
			dst := make([]float32, rows)
			for _, g := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/%dx%d/g%d", f.name, rows, cols, g), func(b *testing.B) {
					w := w()
					testkit.Paired(b, w, g, func() { rowSplit(g, f.matVec, dst, w, x) })
				})
			}
		}
	}
	f := benchFormats[0]
	const ring = 16
	rows, cols := 3072, 3584
	rb := rows * cols * f.size
	lw := lazyWeights(f, ring*rows*cols, 5)
	x := benchX(cols)
	dst := make([]float32, rows)
	for _, g := range []int{1, 2} {
		b.Run(fmt.Sprintf("%s/%dx%dx%d/g%d", f.name, rows, cols, ring, g), func(b *testing.B) {
			w := lw()
			testkit.Paired(b, w, g, func() {
				for e := range ring {
					rowSplit(g, f.matVec, dst, w[e*rb:(e+1)*rb], x)
				}
			})
		})
	}
}

// BenchmarkMatMul measures batched prefill: weight bytes per second while
// applying each row to n activation rows (the work grows with n, the weight
// traffic does not), with the paired read loop as for BenchmarkMatVec.
func BenchmarkMatMul(b *testing.B) {
	f := benchFormats[0]
	for _, sh := range [][2]int{{3072, 3584}, {12288, 7168}} {
		rows, cols := sh[0], sh[1]
		lw := lazyWeights(f, rows*cols, 7)
		for _, n := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/%dx%d/n%d", f.name, rows, cols, n), func(b *testing.B) {
				w, x, dst := lw(), benchX(n*cols), make([]float32, n*rows)
				testkit.Paired(b, w, 1, func() { f.matMul(dst, rows, w, x, n) })
			})
		}
	}
}
