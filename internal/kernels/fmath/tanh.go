package fmath

import "math"

// Rational approximation tanh(x) ≈ x + x·s·P(s)/Q(s), s = x², for |x| < 0.625
// (the classic Cephes coefficients); Q is monic.
const (
	tp0 = -9.64399179425052238628e-01
	tp1 = -9.92877231001918586564e+01
	tp2 = -1.61468768441708447952e+03
	tq0 = 1.12811678491632931402e+02
	tq1 = 2.23548839060100448583e+03
	tq2 = 4.84406305325125486048e+03

	tanhSmall = 0.625
	// Beyond half the largest finite log, 1 − 2/(e^(2|x|)+1) rounds to 1.
	tanhSat = 44.014845965556525
)

// Tanh64 returns the hyperbolic tangent of x. It is deterministic across
// GOARCH and CPU features.
//
// Special cases: Tanh64(±0) = ±0, Tanh64(±Inf) = ±1, Tanh64(NaN) = NaN.
func Tanh64(x float64) float64 {
	a := math.Abs(x)
	switch {
	case x != x:
		return x
	case a > tanhSat:
		return math.Copysign(1, x)
	case a >= tanhSmall:
		return math.Copysign(tanhMid(a), x)
	case x == 0:
		return x
	}
	s := float64(x * x)
	num := float64(tp0 * s)
	num = float64((num + tp1) * s)
	num = num + tp2
	den := s + tq0
	den = float64(den * s)
	den = float64((den + tq1) * s)
	den = den + tq2
	return x + float64(float64(x*s)*num)/den
}

// Tanh32 returns f32(Tanh64(f64(x))) (§5.5).
func Tanh32(x float32) float32 {
	return float32(Tanh64(float64(x)))
}

// tanhMid returns tanh(a) for 0.625 ≤ a ≤ tanhSat as (1−m)/(1+m), m = e^(−2a)
// ∈ (0, 0.29). The numerator, denominator and quotient are carried with
// their rounding errors (error-free transformations, no FMA) so that the
// only significant error left is the one of m, damped by a factor below 0.65;
// the naive 1 − 2/(e^(2a)+1) loses up to two ulps near a = 0.63.
func tanhMid(a float64) float64 {
	m := Exp64(-(a + a))
	// 1 ≥ m, so Fast2Sum gives the exact rounding errors.
	n := 1 - m
	nlo := (1 - n) - m
	d := 1 + m
	dlo := m - (d - 1)
	q := n / d
	// r = n − q·d exactly, via Dekker's product.
	ph, pl := twoProd(q, d)
	r := (n - ph) - pl
	corr := (r + nlo - float64(q*dlo)) / d
	return q + corr
}

// twoProd returns p = fl(a·b) and e with a·b = p + e exactly (Dekker/Veltkamp
// splitting; written without FMA so it is identical on every GOARCH).
func twoProd(a, b float64) (p, e float64) {
	p = float64(a * b)
	ah, al := split(a)
	bh, bl := split(b)
	e = float64(ah*bh) - p
	e += float64(ah * bl)
	e += float64(al * bh)
	e += float64(al * bl)
	return p, e
}

// split returns hi + lo = a with hi holding the top 26 significand bits.
func split(a float64) (hi, lo float64) {
	const c = 1<<27 + 1
	t := float64(c * a)
	hi = t - (t - a)
	lo = a - hi
	return hi, lo
}
