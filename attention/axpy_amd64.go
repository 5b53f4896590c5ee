//go:build amd64 && !purego

package attention

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels, and useAVX512 their zmm loops;
// computed once from CPUID.
var (
	useAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	useAVX512 = useAVX2 && cpu.X86.HasAVX512F
)

// axpy4AVX2 covers the first n elements (n > 0, a multiple of 4).
//
//go:noescape
func axpy4AVX2(acc *float64, x0, x1, x2, x3 *float32, a *float64, n int, z bool)

//go:noescape
func axpy1AVX2(acc *float64, x *float32, a float64, n int)

func axpy1(acc []float64, a float64, x []float32) {
	n := len(acc)
	m := n &^ 3
	if !useAVX2 || m == 0 {
		axpy1Go(acc, a, x)
		return
	}
	x = x[:n]
	axpy1AVX2(&acc[0], &x[0], a, m)
	axpy1Go(acc[m:], a, x[m:])
}

func axpy4(acc []float64, a []float64, x0, x1, x2, x3 []float32) {
	n := len(acc)
	m := n &^ 3
	if !useAVX2 || m == 0 {
		axpy4Go(acc, a, x0, x1, x2, x3)
		return
	}
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	axpy4AVX2(&acc[0], &x0[0], &x1[0], &x2[0], &x3[0], &a[0], m, useAVX512)
	axpy4Go(acc[m:], a, x0[m:], x1[m:], x2[m:], x3[m:])
}
