package quant

import "math"

// F16ToF32 widens an IEEE binary16 bit pattern exactly (subnormals
// renormalised, ±0, ±Inf and NaN payloads kept).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: shift the mantissa up until its leading one reaches bit 10.
	e := uint32(113)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

// F32ToBF16 rounds v to bfloat16, nearest even; NaN stays a (quiet) NaN.
func F32ToBF16(v float32) uint16 {
	b := math.Float32bits(v)
	if v != v {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F32ToF16 rounds v to IEEE binary16, nearest even, overflowing to ±Inf;
// NaN stays a (quiet) NaN.
func F32ToF16(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	a := float64(math.Abs(float64(v)))
	switch {
	case v != v:
		return sign | 0x7e00
	case a >= 65520: // halfway between 65504 and 2^16 rounds to Inf
		return sign | 0x7c00
	case a < math.Ldexp(1, -14):
		// Subnormal: units of 2^−24, rounded to even.
		return sign | uint16(math.RoundToEven(a*(1<<24)))
	}
	e := math.Ilogb(a)
	m := math.RoundToEven(math.Ldexp(a, 10-e)) // in [1024, 2048]
	if m == 2048 {
		m = 1024
		e++
	}
	if e > 15 {
		return sign | 0x7c00
	}
	return sign | uint16(e+15)<<10 | (uint16(m) - 1024)
}
