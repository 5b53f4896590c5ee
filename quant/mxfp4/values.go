package mxfp4

import "math"

// GroupSize is the number of consecutive elements of a row that share one
// E8M0 scale byte. Changing it is a format change.
const GroupSize = 32

// NaNScale is the E8M0 byte that OCP reserves for NaN. A group with this
// scale contributes exactly nothing (see the package documentation).
const NaNScale = 255

// e2m1 holds the E2M1 value of each 4-bit code (bit 3 = sign).
var e2m1 = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// e2m1f64 is e2m1 widened, used by the pure-Go kernel.
var e2m1f64 = [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, math.Copysign(0, -1), -0.5, -1, -1.5, -2, -3, -4, -6}

// E2M1 returns the value of the 4-bit code (only the low four bits of code
// are used): 0, 0.5, 1, 1.5, 2, 3, 4, 6 for codes 0–7 and their negatives for
// codes 8–15 (code 8 is −0).
func E2M1(code byte) float32 { return e2m1[code&15] }

// Scale decodes an E8M0 scale byte. For s in [1, 254] it returns 2^(s−127);
// for s = 0 it returns 2^−127 (a float32 subnormal). For s = 255 it returns
// (0, false): the group contributes nothing. Every returned value is exact.
func Scale(s byte) (v float32, ok bool) {
	if s == NaNScale {
		return 0, false
	}
	return float32(scale64(s)), true
}

// scale64 is 2^(s−127) for s in [0, 254], built from its float64 bits
// (the exponent field of 2^(s−127) is s−127+1023 = s+896; float64 has no
// subnormal problem at s = 0).
func scale64(s byte) float64 {
	return math.Float64frombits((uint64(s) + 896) << 52)
}
