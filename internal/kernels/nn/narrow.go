package nn

import (
	"math"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// Vec is a vector of weights (an RMSNorm gain) held no wider than the
// checkpoint stores it: float32, or the 16-bit patterns of bfloat16 or IEEE
// binary16, which are widened element by element where they are used.
// Widening either 16-bit format to float32 is exact, so a function given a
// narrow Vec computes the same bits as one given its float32 values; the
// narrow form only halves what a model holds. The zero Vec is empty.
type Vec struct {
	f32  []float32
	bits []uint16 // bfloat16 or binary16 patterns when f32 is nil
	half bool     // bits are binary16
}

// F32 returns a Vec holding v itself (not a copy).
func F32(v []float32) Vec { return Vec{f32: v} }

// Narrow returns v held as bfloat16 (half false) or binary16 (half true)
// patterns when every element round-trips through that format bit for bit,
// as values widened from it do; otherwise, or when v is empty, it returns
// F32(v) and false. A value never changes: narrowing is only ever undone
// exactly.
func Narrow(v []float32, half bool) (Vec, bool) {
	if len(v) == 0 {
		return F32(v), false
	}
	bits := make([]uint16, len(v))
	for i, x := range v {
		var h uint16
		var back float32
		if half {
			h = floatbits.ToF16(x)
			back = floatbits.F16(h)
		} else {
			h = uint16(math.Float32bits(x) >> 16)
			back = floatbits.BF16(h)
		}
		if math.Float32bits(back) != math.Float32bits(x) {
			return F32(v), false
		}
		bits[i] = h
	}
	return Vec{bits: bits, half: half}, true
}

// Narrowest returns v held as bfloat16 patterns when every element has one,
// else as binary16 patterns when every element has one, else as float32: a
// gain whose values were widened from either 16-bit format is held in two
// bytes an element whatever format its caller widened it from.
func Narrowest(v []float32) Vec {
	if n, ok := Narrow(v, false); ok {
		return n
	}
	n, _ := Narrow(v, true)
	return n
}

// Len returns the number of elements.
func (v Vec) Len() int {
	if v.f32 != nil {
		return len(v.f32)
	}
	return len(v.bits)
}

// Bytes returns the bytes the elements occupy as held: 4 or 2 each.
func (v Vec) Bytes() int64 {
	if v.f32 != nil {
		return 4 * int64(len(v.f32))
	}
	return 2 * int64(len(v.bits))
}

// Float32 returns the elements widened into a new slice (the held slice
// itself when the Vec holds float32).
func (v Vec) Float32() []float32 {
	if v.f32 != nil || v.bits == nil {
		return v.f32
	}
	out := make([]float32, len(v.bits))
	for i, h := range v.bits {
		out[i] = v.at(h)
	}
	return out
}

func (v Vec) at(h uint16) float32 {
	if v.half {
		return floatbits.F16(h)
	}
	return floatbits.BF16(h)
}
