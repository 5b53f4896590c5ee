package fmath

import "math"

// Constants of the exp reduction. ln2Hi has its low 32 bits clear so that
// k·ln2Hi is exact for every k the reduction can produce; ln2Lo carries the
// remainder of ln 2.
const (
	ln2Hi  = 6.93147180369123816490e-01
	ln2Lo  = 1.90821492927058770002e-10
	log2e  = 1.44269504088896338700e+00
	expMax = 7.09782712893383973096e+02  // above: +Inf
	expMin = -7.45133219101941108420e+02 // below: +0
	tiny   = 1.0 / (1 << 28)             // below |x|: exp(x) = 1 + x

	// Remez coefficients of R(r²) ≈ r·(e^r+1)/(e^r−1) − 2 on [0, 0.347²].
	ep1 = 1.66666666666666657415e-01
	ep2 = -2.77777777770155933842e-03
	ep3 = 6.61375632143793436117e-05
	ep4 = -1.65339022054652515390e-06
	ep5 = 4.13813679705723846039e-08
)

// Exp64 returns e**x. It is deterministic across GOARCH and CPU features and
// within one ulp of the correctly rounded result.
//
// Special cases: Exp64(+Inf) = +Inf, Exp64(−Inf) = 0, Exp64(NaN) = NaN;
// results too large overflow to +Inf, too small underflow to 0.
func Exp64(x float64) float64 {
	switch {
	case x != x || x > expMax:
		if x != x {
			return x
		}
		return math.Inf(1)
	case x < expMin:
		return 0
	case -tiny < x && x < tiny:
		return 1 + x
	}
	// k = round(x / ln2), by truncation after adding ±0.5.
	var k int
	t := float64(log2e * x)
	if x < 0 {
		k = int(t - 0.5)
	} else {
		k = int(t + 0.5)
	}
	fk := float64(k)
	hi := x - float64(fk*ln2Hi)
	lo := float64(fk * ln2Lo)
	return expReduced(hi, lo, k)
}

// expReduced returns e**(hi−lo) · 2**k with |hi−lo| ≤ ln2/2.
func expReduced(hi, lo float64, k int) float64 {
	r := hi - lo
	t := float64(r * r)
	p := ep5
	p = ep4 + float64(t*p)
	p = ep3 + float64(t*p)
	p = ep2 + float64(t*p)
	p = ep1 + float64(t*p)
	c := r - float64(t*p)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return scale2(y, k)
}

// scale2 returns y·2**k for y in [0.5, 2], rounding once even when the result
// is subnormal or overflows.
func scale2(y float64, k int) float64 {
	switch {
	case k > 1023:
		return float64(y*pow2(1023)) * pow2(k-1023)
	case k < -1022:
		// Bring the result into the normal range exactly, then round once.
		return float64(y*pow2(k+53)) * pow2(-53)
	default:
		return y * pow2(k)
	}
}

// pow2 returns 2**k for k in [−1022, 1023].
func pow2(k int) float64 {
	return math.Float64frombits(uint64(k+1023) << 52)
}

// Exp32 returns f32(Exp64(f64(x))) (§5.5).
func Exp32(x float32) float32 {
	return float32(Exp64(float64(x)))
}
