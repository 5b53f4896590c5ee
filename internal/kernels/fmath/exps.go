package fmath

// Exp64s sets dst[i] = Exp64(x[i]) for every i < len(x); dst must be at
// least as long as x and may be x. On amd64 with AVX-512 eight lanes at a
// time (with AVX2 four) go through a kernel that performs the operations of Exp64 in the
// same order with the same roundings (no fused multiply-add), so the bits
// are Exp64's; a block holding an argument outside the kernel's range
// (NaN, |x| < 2^−28 except ±0, |x| > 708, where Exp64 takes a special
// path) is computed by Exp64 itself.
func Exp64s(dst, x []float64) {
	dst = dst[:len(x)]
	i := expBlocks(dst, x)
	for ; i < len(x); i++ {
		dst[i] = Exp64(x[i])
	}
}

// Tanh64s sets dst[i] = Tanh64(x[i]) for every i < len(x); dst must be at
// least as long as x and may be x. On amd64 with AVX-512 eight lanes at a
// time (with AVX2 four) go through a kernel that evaluates every path of Tanh64 with its
// operations in its order and keeps each lane's, so the bits are Tanh64's.
func Tanh64s(dst, x []float64) {
	dst = dst[:len(x)]
	i := tanhBlocks(dst, x)
	for ; i < len(x); i++ {
		dst[i] = Tanh64(x[i])
	}
}

// expChunk is how many arguments the float32 slice forms convert at a time,
// into a buffer on the stack.
const expChunk = 64

// Sigmoid32s sets dst[i] = Sigmoid32(x[i]); dst may be x.
func Sigmoid32s(dst, x []float32) { exp32s(dst, x, true) }

// Exp32s sets dst[i] = Exp32(x[i]); dst may be x.
func Exp32s(dst, x []float32) { exp32s(dst, x, false) }

// exp32s runs Exp64s over a chunk of x widened to float64 (negated for the
// sigmoid) and finishes each element in float32: Sigmoid32's 1 ⊘ (1 ⊕ e)
// or Exp32's rounding.
func exp32s(dst, x []float32, sigmoid bool) {
	dst = dst[:len(x)]
	var b [expChunk]float64
	for lo := 0; lo < len(x); lo += expChunk {
		xs := x[lo:min(lo+expChunk, len(x))]
		e := b[:len(xs)]
		for i := widenBlocks(e, xs, sigmoid); i < len(xs); i++ {
			if sigmoid {
				e[i] = -float64(xs[i])
			} else {
				e[i] = float64(xs[i])
			}
		}
		Exp64s(e, e)
		d := dst[lo : lo+len(xs)]
		for i := narrowBlocks(d, e, sigmoid); i < len(xs); i++ {
			if sigmoid {
				d[i] = 1 / (1 + float32(e[i]))
			} else {
				d[i] = float32(e[i])
			}
		}
	}
}
