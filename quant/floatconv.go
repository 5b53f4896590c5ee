package quant

import (
	"math"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// F16ToF32 widens an IEEE binary16 bit pattern exactly (subnormals
// renormalised, ±0, ±Inf and NaN payloads kept); it is the inverse of
// F32ToF16 on every non-NaN result.
func F16ToF32(h uint16) float32 { return floatbits.F16(h) }

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
