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
