package safetensors

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// Widenable reports whether WidenF32 (and Checkpoint.ReadF32) accept d.
func Widenable(d DType) bool {
	switch d {
	case F32, BF16, F16, F64, F8_E4M3, F8_E5M2, F8_E8M0,
		U8, I8, I16, U16, I32, U32, I64, U64:
		return true
	}
	return false
}

// WidenF32 converts little-endian elements of dtype d in src to float32
// (§5.1, §7.2): floats exactly (F64 rounded once to nearest even),
// integers to the nearest float32. len(dst) must be the element count of
// src.
func WidenF32(dst []float32, src []byte, d DType) error {
	switch d {
	case F32:
		return F32ToF32(dst, src)
	case BF16:
		return BF16ToF32(dst, src)
	case F16:
		return F16ToF32(dst, src)
	case F64:
		return F64ToF32(dst, src)
	case F8_E4M3:
		return E4M3ToF32(dst, src)
	case F8_E5M2:
		return E5M2ToF32(dst, src)
	case F8_E8M0:
		return E8M0ToF32(dst, src)
	case U8, I8, I16, U16, I32, U32, I64, U64:
		return IntToF32(dst, src, d)
	}
	return &Error{Pos: -1, Err: ErrNotWidenable, Detail: d.String()}
}

func checkLen(dst []float32, src []byte, size int) error {
	if len(src) != len(dst)*size {
		return &Error{Pos: -1, Err: ErrLength,
			Detail: strconv.Itoa(len(src)) + " source bytes for " + strconv.Itoa(len(dst)) + " elements of " + strconv.Itoa(size) + " bytes"}
	}
	return nil
}

// F32ToF32 decodes little-endian float32 values (bit patterns unchanged,
// NaN payloads included).
func F32ToF32(dst []float32, src []byte) error {
	if err := checkLen(dst, src, 4); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
	return nil
}

// BF16ToF32 widens bfloat16 values: the bits become the high half of a
// float32, which is exact and keeps NaN payloads.
func BF16ToF32(dst []float32, src []byte) error {
	if err := checkLen(dst, src, 2); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = floatbits.BF16(binary.LittleEndian.Uint16(src[2*i:]))
	}
	return nil
}

// F16ToF32 widens IEEE half-precision values exactly, subnormals, ±0, ±Inf
// and NaN payloads included.
func F16ToF32(dst []float32, src []byte) error {
	if err := checkLen(dst, src, 2); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = floatbits.F16(binary.LittleEndian.Uint16(src[2*i:]))
	}
	return nil
}

// F16Bits returns the float32 bit pattern equal to the half-precision value
// h.
func F16Bits(h uint16) uint32 { return math.Float32bits(floatbits.F16(h)) }

// F64ToF32 rounds little-endian float64 values once to the nearest float32
// (ties to even), as Go's conversion does.
func F64ToF32(dst []float32, src []byte) error {
	if err := checkLen(dst, src, 8); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
	}
	return nil
}

// E4M3ToF32 decodes OCP FP8 E4M3-FN bytes exactly (§6.4): bias 7, no
// infinities, 0x7F/0xFF NaN.
func E4M3ToF32(dst []float32, src []byte) error {
	if err := checkLen(dst, src, 1); err != nil {
		return err
	}
	for i, b := range src {
		dst[i] = e4m3Table[b]
	}
	return nil
}

// E5M2ToF32 decodes FP8 E5M2 bytes exactly. E5M2 is the high byte of an
// IEEE half, so it inherits its infinities, NaNs and subnormals.
func E5M2ToF32(dst []float32, src []byte) error {
	if err := checkLen(dst, src, 1); err != nil {
		return err
	}
	for i, b := range src {
		dst[i] = floatbits.E5M2(b)
	}
	return nil
}

// E8M0ToF32 decodes unsigned power-of-two scales 2^(b−127). Byte 255 is
// NaN here; callers with another policy (MXFP4 treats it as "no
// contribution") handle it before widening.
func E8M0ToF32(dst []float32, src []byte) error {
	if err := checkLen(dst, src, 1); err != nil {
		return err
	}
	for i, b := range src {
		dst[i] = e8m0(b)
	}
	return nil
}

func e8m0(b byte) float32 {
	switch b {
	case 255:
		return float32(math.NaN())
	case 0:
		return math.Float32frombits(1 << 22) // 2^-127, a float32 subnormal
	}
	return math.Float32frombits(uint32(b) << 23)
}

// IntToF32 converts little-endian integers of dtype d to the nearest
// float32 (exact up to 2^24 in magnitude).
func IntToF32(dst []float32, src []byte, d DType) error {
	switch d {
	case U8, I8, I16, U16, I32, U32, I64, U64:
	default:
		return &Error{Pos: -1, Err: ErrNotWidenable, Detail: d.String() + " is not an integer dtype"}
	}
	if err := checkLen(dst, src, d.Bits()/8); err != nil {
		return err
	}
	le := binary.LittleEndian
	for i := range dst {
		switch d {
		case U8:
			dst[i] = float32(src[i])
		case I8:
			dst[i] = float32(int8(src[i]))
		case U16:
			dst[i] = float32(le.Uint16(src[2*i:]))
		case I16:
			dst[i] = float32(int16(le.Uint16(src[2*i:])))
		case U32:
			dst[i] = float32(le.Uint32(src[4*i:]))
		case I32:
			dst[i] = float32(int32(le.Uint32(src[4*i:])))
		case U64:
			dst[i] = float32(le.Uint64(src[8*i:]))
		case I64:
			dst[i] = float32(int64(le.Uint64(src[8*i:])))
		}
	}
	return nil
}

// e4m3Table holds every E4M3 value; §6.4 asks for a table built
// before any concurrent use, which a package-level initializer guarantees.
var e4m3Table = func() (t [256]float32) {
	for b := range t {
		t[b] = floatbits.E4M3(byte(b))
	}
	return t
}()
