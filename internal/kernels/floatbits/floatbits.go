package floatbits

import "math"

// BF16 widens a bfloat16 bit pattern. bfloat16 is the top half of a
// float32, so the result is exact and NaN payloads survive unchanged.
func BF16(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F16 widens an IEEE binary16 bit pattern exactly: ±0, subnormals
// (renormalised: every half subnormal is a normal float32), ±Inf, and NaN
// with its sign and its 10 payload bits moved to the top of the float32
// mantissa.
func F16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // rebias 15 -> 127
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: man·2^-24. Shift the leading one up to the implicit
	// position; the exponent drops by one per shift.
	e := uint32(113) // biased float32 exponent of 2^-14
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

// ToF16 narrows x to the IEEE binary16 pattern nearest to it, ties to even,
// overflowing to ±Inf; a NaN keeps its sign and the top ten bits of its
// payload (a NaN whose payload lies below them has no binary16 pattern and
// comes out as an infinity). Where x is the exact widening of a pattern (F16),
// that pattern is returned, so F16(ToF16(x)) == x tells whether x has one.
func ToF16(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff:
		return sign | 0x7c00 | uint16(man>>13)
	case exp >= 143: // 2^16 and above
		return sign | 0x7c00
	case exp >= 113: // a normal half: rebias 127 -> 15 and round off 13 bits
		h := uint32(exp-112)<<10 | man>>13
		if rem := man & 0x1fff; rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
			h++ // a carry into the exponent is right, up to 0x7c00 (Inf)
		}
		return sign | uint16(h)
	}
	// A subnormal half counts units of 2^-24; x is (man|2^23)·2^(exp-150),
	// so shift right by 126-exp, which is at least 14.
	shift := uint(126 - exp)
	if shift > 24 {
		return sign // below half a unit
	}
	full := man | 0x800000
	q := full >> shift
	if rem, half := full&(1<<shift-1), uint32(1)<<(shift-1); rem > half || rem == half && q&1 == 1 {
		q++ // 0x400 is the smallest normal pattern
	}
	return sign | uint16(q)
}

// E5M2 widens an FP8 E5M2 byte. E5M2 is the high byte of an IEEE half, so
// it inherits the half's infinities, NaNs and subnormals.
func E5M2(b byte) float32 { return F16(uint16(b) << 8) }

// E4M3 widens an OCP FP8 E4M3-FN byte: bit 7 sign, bits 6–3 exponent (bias
// 7), bits 2–0 mantissa; 0x7F and 0xFF are NaN, there are no infinities, and
// ±0 keep their sign. Hot loops should index a 256-entry table built from
// this function.
func E4M3(b byte) float32 {
	e := int(b>>3) & 15
	m := int(b & 7)
	var v float64
	switch {
	case e == 15 && m == 7:
		v = math.NaN()
	case e == 0:
		v = math.Ldexp(float64(m), -9) // (m/8)·2^-6
	default:
		v = math.Ldexp(float64(8+m), e-10) // (1 + m/8)·2^(e-7)
	}
	if b&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

// Widen64 returns x converted to float64 (exact), in dst when its capacity
// suffices. Kernels widen activations once per call so every f64 product of the
// R16/RG reductions starts from the same exact values.
func Widen64(dst []float64, x []float32) []float64 {
	if cap(dst) < len(x) {
		dst = make([]float64, len(x))
	}
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = float64(v)
	}
	return dst
}
