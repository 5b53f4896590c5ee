package testkit

import "math"

// RefF16 widens an IEEE binary16 value by arithmetic on its fields
// (math.Ldexp), not by the bit assembly of the kernels and of
// internal/kernels/floatbits: the tests' independent statement of the format
// (§5.1). Every binary16 value is exact in float64 and in float32.
func RefF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 31
	f := int(h & 0x3ff)
	switch {
	case e == 31 && f == 0:
		return math.Inf(int(sign))
	case e == 31:
		return math.NaN()
	case e == 0:
		return sign * math.Ldexp(float64(f), -24)
	}
	return sign * math.Ldexp(float64(1024+f), e-25)
}

// RefR16 is the R16 reduction of §5.2 written out plainly over weights already
// widened to float64, before the final rounding to float32: sixteen lane sums
// in element order, the fixed tree over them, then the tail in order. It is
// the one reference every kernel's R16 result (bf16, the integer formats,
// lossless12) must equal bit for bit.
func RefR16(w []float64, x []float32) float64 {
	n := len(x)
	m := n &^ 15
	var a [16]float64
	for i := range m {
		a[i%16] += w[i] * float64(x[i])
	}
	var c [4]float64
	for l := range 4 {
		c[l] = (a[l] + a[l+4]) + (a[l+8] + a[l+12])
	}
	acc := (c[0] + c[1]) + (c[2] + c[3])
	for i := m; i < n; i++ {
		acc += w[i] * float64(x[i])
	}
	return acc
}
