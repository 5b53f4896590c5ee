//go:build amd64 && !purego

package fmath

import "golang.org/x/sys/cpu"

// useAVX512 selects the eight-lane exp kernel (AVX512F for the arithmetic,
// DQ for the float64↔int64 conversions and the logical ops on doubles).
// Tests clear it to run the scalar path on the same machine.
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// useAVX2 selects the four-lane exp and tanh kernels, and the float32 slice
// forms' widening and narrowing, where AVX-512 DQ is missing.
// Tests clear it to run the scalar path.
var useAVX2 = cpu.X86.HasAVX2

// exp64AVX2 is exp64AVX512 on four lanes (n a multiple of 4).
//
//go:noescape
func exp64AVX2(dst, x *float64, n int) int

// exp64AVX512 sets dst[i] = Exp64(x[i]) for whole blocks of eight from the
// start of x (n elements, a multiple of 8), stopping before the first block
// with an argument outside the kernel's range; it returns how many elements
// it did.
//
//go:noescape
func exp64AVX512(dst, x *float64, n int) int

// expBlocks runs the kernel over the whole blocks of x, doing a block it
// refuses with Exp64, and returns how many elements are done.
func expBlocks(dst, x []float64) int {
	lanes := 8
	switch {
	case useAVX512:
	case useAVX2:
		lanes = 4
	default:
		return 0
	}
	n := len(x) / lanes * lanes
	i := 0
	for i < n {
		// Direct calls, not a func value, so that dst and x stay where
		// the caller put them (exp32s keeps its chunk on the stack).
		if lanes == 8 {
			i += exp64AVX512(&dst[i], &x[i], n-i)
		} else {
			i += exp64AVX2(&dst[i], &x[i], n-i)
		}
		if i < n {
			for j := i; j < i+lanes; j++ {
				dst[j] = Exp64(x[j])
			}
			i += lanes
		}
	}
	return n
}

// tanh64AVX512 sets dst[i] = Tanh64(x[i]) for i < n, a multiple of 8.
//
//go:noescape
func tanh64AVX512(dst, x *float64, n int)

// tanhBlocks runs the kernel over the whole blocks of x and returns how many
// elements are done.
func tanhBlocks(dst, x []float64) int {
	var n int
	switch {
	case useAVX512:
		if n = len(x) &^ 7; n > 0 {
			tanh64AVX512(&dst[0], &x[0], n)
		}
	case useAVX2:
		if n = len(x) &^ 3; n > 0 {
			tanh64AVX2(&dst[0], &x[0], n)
		}
	}
	return n
}

// tanh64AVX2 is tanh64AVX512 on four lanes (n a multiple of 4).
//
//go:noescape
func tanh64AVX2(dst, x *float64, n int)

//go:noescape
func widen32(dst *float64, x *float32, n int, neg bool)

//go:noescape
func narrow32(dst *float32, e *float64, n int, sigmoid bool)

// widenBlocks sets e[i] = ±f64(x[i]) for the whole blocks of sixteen and
// returns how many it did.
func widenBlocks(e []float64, x []float32, neg bool) int {
	n := len(x) &^ 15
	if n == 0 {
		return 0
	}
	_ = e[n-1]
	switch {
	case useAVX512:
		widen32(&e[0], &x[0], n, neg)
	case useAVX2:
		widen32AVX2(&e[0], &x[0], n, neg)
	default:
		return 0
	}
	return n
}

// narrowBlocks sets dst[i] = f32(e[i]), or 1 ⊘ (1 ⊕ f32(e[i])), for the
// whole blocks of sixteen and returns how many it did.
func narrowBlocks(dst []float32, e []float64, sigmoid bool) int {
	n := len(e) &^ 15
	if n == 0 {
		return 0
	}
	_ = dst[n-1]
	switch {
	case useAVX512:
		narrow32(&dst[0], &e[0], n, sigmoid)
	case useAVX2:
		narrow32AVX2(&dst[0], &e[0], n, sigmoid)
	default:
		return 0
	}
	return n
}

// widen32AVX2 and narrow32AVX2 are widen32 and narrow32 for AVX2.
//
//go:noescape
func widen32AVX2(dst *float64, x *float32, n int, neg bool)

//go:noescape
func narrow32AVX2(dst *float32, e *float64, n int, sigmoid bool)
