package nn

import "math"

// L2Eps is f32(1e−6), the epsilon inside L2Norm's square root (SPEC §5.1).
const L2Eps float32 = 1e-6

// SumSquares returns Σ x_i² as a sequential float64 sum, index ascending (RS).
func SumSquares(x []float32) float64 {
	var ss float64
	for _, v := range x {
		f := float64(v)
		ss += f * f
	}
	return ss
}

// RMSScale returns r = f32(1/sqrt(RS(x²)/n + eps)), the reciprocal RMS that
// RMSNorm and the AttnRes keys multiply by. eps is the float32 config value,
// widened exactly.
func RMSScale(x []float32, eps float32) float32 {
	ms := SumSquares(x)/float64(len(x)) + float64(eps)
	return float32(1 / math.Sqrt(ms))
}

// RMSNorm sets dst_i = w_i ⊗ (x_i ⊗ r) with r = RMSScale(x, eps) (SPEC §4.1:
// mean of squares, eps inside the root). dst may alias x. len(w), len(dst)
// and len(x) must be equal.
func RMSNorm(dst, x, w []float32, eps float32) {
	r := RMSScale(x, eps)
	w = w[:len(x)]
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = w[i] * (v * r)
	}
}

// RMSNormRows applies RMSNorm to each of the len(x)/len(w) rows of x.
func RMSNormRows(dst, x, w []float32, eps float32) {
	n := len(w)
	for lo := 0; lo+n <= len(x); lo += n {
		RMSNorm(dst[lo:lo+n], x[lo:lo+n], w, eps)
	}
}

// L2Norm sets dst_i = x_i ⊗ r with r = f32(1/sqrt(RS(x²) + f32(1e−6))) (SPEC
// §4.1: the sum of squares, no gain). dst may alias x.
func L2Norm(dst, x []float32) {
	r := float32(1 / math.Sqrt(SumSquares(x)+float64(L2Eps)))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v * r
	}
}
