package dot

import (
	"encoding/binary"
	"math"
)

// BF16ToF32 widens a bfloat16 bit pattern to float32. It is exact: bfloat16
// is the top half of a float32, so NaN payloads survive unchanged.
func BF16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F16ToF32 widens an IEEE 754 binary16 bit pattern to float32 exactly,
// including ±0, subnormals (renormalised), ±Inf and NaN (payload shifted
// into the top of the float32 mantissa, quiet bit preserved as given).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN keep their mantissa bits.
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal: rebias 15 -> 127.
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = mant·2^-24. Shift the leading one up to the
	// implicit position; every f16 subnormal is a normal f32.
	e := uint32(113) // biased f32 exponent of 2^-14
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// f32At, bf16At and f16At read element i of a little-endian weight row.
func f32At(w []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
}

func bf16At(w []byte, i int) float32 {
	return BF16ToF32(binary.LittleEndian.Uint16(w[2*i:]))
}

func f16At(w []byte, i int) float32 {
	return F16ToF32(binary.LittleEndian.Uint16(w[2*i:]))
}
