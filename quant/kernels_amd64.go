//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels; computed once from CPUID and never
// written afterwards.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func r16Int8AVX2(q *byte, xw *float64, n int) float64

//go:noescape
func r16Int4AVX2(q *byte, xw *float64, n int) float64

//go:noescape
func rgInt4AVX2(q *byte, xw *float64, scales *byte, gs, ng int) float64

//go:noescape
func rgFP8AVX2(q *byte, xw *float64, scales *byte, ng int) float64

// r16Int8 is r16Int8Go with the 16-lane body in assembly.
func r16Int8(q []byte, x []float64) float64 {
	n := len(x)
	m := n &^ 15
	if !useAVX2 || m == 0 {
		return r16Int8Go(q, x)
	}
	q = q[:n]
	acc := r16Int8AVX2(&q[0], &x[0], m)
	for i := m; i < n; i++ {
		acc += float64(int8(q[i])) * x[i]
	}
	return acc
}

// r16Int4 is r16Int4Go with the 16-lane body in assembly.
func r16Int4(q []byte, x []float64) float64 {
	n := len(x)
	m := n &^ 15
	if !useAVX2 || m == 0 {
		return r16Int4Go(q, x)
	}
	q = q[:(n+1)/2]
	acc := r16Int4AVX2(&q[0], &x[0], m)
	for i := m; i < n; i++ {
		acc += nibAt(q, i) * x[i]
	}
	return acc
}

// rgInt4Row is rgInt4RowGo with the full groups in assembly.
func rgInt4Row(q []byte, x []float64, sc []byte, gs int) float64 {
	full := len(x) / gs
	if !useAVX2 || full == 0 {
		return rgInt4RowGo(q, x, sc, gs)
	}
	_ = q[(full*gs)/2-1]
	_ = sc[4*full-1]
	acc := rgInt4AVX2(&q[0], &x[0], &sc[0], gs, full)
	return rgInt4Tail(acc, q, x, sc, gs, full)
}

// rgFP8Row is rgFP8RowGo with the full groups in assembly.
func rgFP8Row(q []byte, x []float64, sc []byte) float64 {
	full := len(x) / FP8Block
	if !useAVX2 || full == 0 {
		return rgFP8RowGo(q, x, sc)
	}
	_ = q[full*FP8Block-1]
	_ = sc[4*full-1]
	acc := rgFP8AVX2(&q[0], &x[0], &sc[0], full)
	return rgFP8Tail(acc, q, x, sc, full)
}
