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
// NaN becomes the quiet NaN of its sign.
func F32ToF16(v float32) uint16 {
	if v != v {
		return uint16(math.Float32bits(v)>>16)&0x8000 | 0x7e00
	}
	return floatbits.ToF16(v)
}
