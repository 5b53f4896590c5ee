package nn

import (
	"math"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// L2Eps is f32(1e−6), the epsilon inside L2Norm's square root (§5.1).
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

// sumSquares4 is SumSquares of four rows of len(a) elements at once. Each
// sum is still one sequential chain in index order; four independent chains
// in one loop let the processor overlap the adds that a single chain waits
// on, so four rows cost about what one does. Callers take the rows left over
// one at a time.
func sumSquares4(a, b, c, d []float32) (sa, sb, sc, sd float64) {
	n := len(a)
	b, c, d = b[:n], c[:n], d[:n]
	for i, v := range a {
		fa, fb, fc, fd := float64(v), float64(b[i]), float64(c[i]), float64(d[i])
		sa += fa * fa
		sb += fb * fb
		sc += fc * fc
		sd += fd * fd
	}
	return sa, sb, sc, sd
}

// RMSScale returns r = f32(1/sqrt(RS(x²)/n + eps)), the reciprocal RMS that
// RMSNorm and the AttnRes keys multiply by. eps is the float32 config value,
// widened exactly.
func RMSScale(x []float32, eps float32) float32 {
	return rmsScale(SumSquares(x), len(x), eps)
}

// rmsScale is RMSScale of n elements whose sum of squares is ss.
func rmsScale(ss float64, n int, eps float32) float32 {
	return float32(1 / math.Sqrt(ss/float64(n)+float64(eps)))
}

// RMSNorm sets dst_i = w_i ⊗ (x_i ⊗ r) with r = RMSScale(x, eps) (§4.1:
// mean of squares, eps inside the root). dst may alias x. len(w), len(dst)
// and len(x) must be equal.
func RMSNorm(dst, x, w []float32, eps float32) { F32(w).RMSNorm(dst, x, eps) }

// RMSNormRows applies RMSNorm to each of the len(x)/len(w) rows of x.
func RMSNormRows(dst, x, w []float32, eps float32) { F32(w).RMSNormRows(dst, x, eps) }

// RMSNorm is the package's RMSNorm with w as the gain, read at its held
// width and widened exactly per element.
func (w Vec) RMSNorm(dst, x []float32, eps float32) {
	scaleRow(dst, x, w, RMSScale(x, eps))
}

// RMSNormRows applies RMSNorm to each of the len(x)/w.Len() rows of x, four
// rows' sums of squares at a time (sumSquares4).
func (w Vec) RMSNormRows(dst, x []float32, eps float32) {
	n := w.Len()
	lo := 0
	for ; lo+4*n <= len(x); lo += 4 * n {
		x0, x1, x2, x3 := x[lo:lo+n], x[lo+n:lo+2*n], x[lo+2*n:lo+3*n], x[lo+3*n:lo+4*n]
		s0, s1, s2, s3 := sumSquares4(x0, x1, x2, x3)
		scaleRow(dst[lo:lo+n], x0, w, rmsScale(s0, n, eps))
		scaleRow(dst[lo+n:lo+2*n], x1, w, rmsScale(s1, n, eps))
		scaleRow(dst[lo+2*n:lo+3*n], x2, w, rmsScale(s2, n, eps))
		scaleRow(dst[lo+3*n:lo+4*n], x3, w, rmsScale(s3, n, eps))
	}
	for ; lo+n <= len(x); lo += n {
		w.RMSNorm(dst[lo:lo+n], x[lo:lo+n], eps)
	}
}

// scaleRow sets dst_i = w_i ⊗ (x_i ⊗ r), RMSNorm's output given its scale.
// A narrow gain is widened in the loop: the same float32 w_i, so the same
// product, as from a widened copy.
func scaleRow(dst, x []float32, w Vec, r float32) {
	dst = dst[:len(x)]
	switch {
	case w.f32 != nil:
		g := w.f32[:len(x)]
		for i, v := range x {
			dst[i] = g[i] * (v * r)
		}
	case w.half:
		g := w.bits[:len(x)]
		for i, v := range x {
			dst[i] = floatbits.F16(g[i]) * (v * r)
		}
	default:
		g := w.bits[:len(x)]
		for i, v := range x {
			dst[i] = floatbits.BF16(g[i]) * (v * r)
		}
	}
}

// L2Norm sets dst_i = x_i ⊗ r with r = f32(1/sqrt(RS(x²) + f32(1e−6))) (
// §4.1: the sum of squares, no gain). dst may alias x.
func L2Norm(dst, x []float32) {
	r := float32(1 / math.Sqrt(SumSquares(x)+float64(L2Eps)))
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v * r
	}
}
