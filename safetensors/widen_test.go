package safetensors

import (
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestWidenAllHalfCodes(t *testing.T) {
	src := make([]byte, 2*65536)
	for i := 0; i < 65536; i++ {
		binary.LittleEndian.PutUint16(src[2*i:], uint16(i))
	}
	for _, dt := range []DType{F16, BF16} {
		dst := make([]float32, 65536)
		if err := WidenF32(dst, src, dt); err != nil {
			t.Fatal(err)
		}
		for i, v := range dst {
			w := refDecode(dt, src[2*i:2*i+2])
			if !sameFloat(v, w) {
				t.Fatalf("%v %04x: got %v, reference %v", dt, i, v, w)
			}
			if math.IsNaN(w) {
				// NaN payloads survive: the half's mantissa bits appear at the
				// top of the float32 mantissa, sign kept.
				var want uint32
				if dt == BF16 {
					want = uint32(i) << 16
				} else {
					want = uint32(i&0x8000)<<16 | 0x7f800000 | uint32(i&0x3ff)<<13
				}
				if math.Float32bits(v) != want {
					t.Fatalf("%v NaN %04x -> %08x, want %08x", dt, i, math.Float32bits(v), want)
				}
			}
		}
	}
	// Spot values stated by §13.3.
	for h, want := range map[uint16]float64{0x0001: math.Ldexp(1, -24), 0x03FF: 1023 * math.Ldexp(1, -24), 0x0400: math.Ldexp(1, -14), 0x3C00: 1, 0xC000: -2, 0x7BFF: 65504} {
		if got := math.Float32frombits(F16Bits(h)); float64(got) != want {
			t.Errorf("F16 %04x = %v, want %v", h, got, want)
		}
	}
}

func TestWidenFP8(t *testing.T) {
	src := make([]byte, 256)
	for i := range src {
		src[i] = byte(i)
	}
	for _, dt := range []DType{F8_E4M3, F8_E5M2} {
		dst := make([]float32, 256)
		if err := WidenF32(dst, src, dt); err != nil {
			t.Fatal(err)
		}
		for i, v := range dst {
			if w := refDecode(dt, src[i:i+1]); !sameFloat(v, w) {
				t.Errorf("%v %02x: got %v, reference %v", dt, i, v, w)
			}
		}
	}
	e4 := make([]float32, 256)
	E4M3ToF32(e4, src)
	if e4[0x7E] != 448 || e4[0xFE] != -448 || e4[0x01] != float32(math.Ldexp(1, -9)) || !math.IsNaN(float64(e4[0x7F])) || !math.IsNaN(float64(e4[0xFF])) || !math.Signbit(float64(e4[0x80])) {
		t.Errorf("E4M3 anchors: 7E=%v FE=%v 01=%v 80=%v", e4[0x7E], e4[0xFE], e4[0x01], e4[0x80])
	}
	nan := 0
	for _, v := range e4 {
		if math.IsNaN(float64(v)) {
			nan++
		}
	}
	if nan != 2 {
		t.Errorf("E4M3 has %d NaN codes, want 2", nan)
	}
	e8 := make([]float32, 256)
	if err := WidenF32(e8, src, F8_E8M0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 255; i++ {
		if float64(e8[i]) != math.Ldexp(1, i-127) {
			t.Errorf("E8M0 %d = %v", i, e8[i])
		}
	}
	if !math.IsNaN(float64(e8[255])) {
		t.Error("E8M0 255 should be NaN")
	}
}

// nearestF32 rounds a big.Float to float32 with ties to even, as an
// oracle for Go's integer and float64 conversions.
func nearestF32(x *big.Float) float32 {
	f, _ := x.Float32()
	return f
}

func TestWidenIntsAndF64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 4096
	for _, dt := range []DType{U8, I8, U16, I16, U32, I32, U64, I64} {
		sz := dt.Bits() / 8
		src := make([]byte, n*sz)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		// Include the extremes and 2^24+1, the first integer float32 rounds.
		if sz >= 4 {
			for k := 0; k < sz; k++ {
				src[k] = 0xFF
				src[sz+k] = 0
			}
			src[2*sz+sz-1] = 0x80 // most negative for signed types
			binary.LittleEndian.PutUint32(src[3*sz:], 1<<24+1)
		}
		dst := make([]float32, n)
		if err := WidenF32(dst, src, dt); err != nil {
			t.Fatal(err)
		}
		for i := range dst {
			b := src[i*sz : (i+1)*sz]
			var u uint64
			for k := sz - 1; k >= 0; k-- {
				u = u<<8 | uint64(b[k])
			}
			x := new(big.Float).SetPrec(0)
			signed := dt == I8 || dt == I16 || dt == I32 || dt == I64
			if signed && u>>(8*sz-1) == 1 {
				x.SetInt(new(big.Int).Sub(new(big.Int).SetUint64(u), new(big.Int).Lsh(big.NewInt(1), uint(8*sz))))
			} else {
				x.SetUint64(u)
			}
			if w := nearestF32(x); dst[i] != w {
				t.Fatalf("%v %x: got %v, want %v", dt, u, dst[i], w)
			}
		}
	}
	src := make([]byte, 8*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(src[8*i:], rng.Uint64())
	}
	binary.LittleEndian.PutUint64(src, math.Float64bits(1+math.Ldexp(1, -24))) // a tie: rounds to even (1)
	dst := make([]float32, n)
	if err := WidenF32(dst, src, F64); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 1 {
		t.Errorf("tie rounded to %v", dst[0])
	}
	for i := range dst {
		f := math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:]))
		if math.IsNaN(f) {
			if !math.IsNaN(float64(dst[i])) {
				t.Fatal("NaN lost")
			}
			continue
		}
		if w := nearestF32(new(big.Float).SetFloat64(f)); dst[i] != w && !(math.IsInf(float64(dst[i]), 0) && math.Abs(f) > math.MaxFloat32) {
			t.Fatalf("F64 %v: got %v, want %v", f, dst[i], w)
		}
	}
}

func TestWidenErrors(t *testing.T) {
	if err := BF16ToF32(make([]float32, 3), make([]byte, 5)); !errors.Is(err, ErrLength) {
		t.Errorf("length: %v", err)
	}
	for _, dt := range []DType{BOOL, C64, F4, F6_E2M3, F6_E3M2, Invalid} {
		if err := WidenF32(nil, nil, dt); !errors.Is(err, ErrNotWidenable) {
			t.Errorf("%v: %v", dt, err)
		}
	}
	if err := IntToF32(nil, nil, F32); !errors.Is(err, ErrNotWidenable) {
		t.Errorf("IntToF32(F32): %v", err)
	}
}

func TestDTypes(t *testing.T) {
	names := []string{"BOOL", "C64", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F16", "BF16", "F32", "F64", "F4", "F6_E2M3", "F6_E3M2"}
	bits := []int{8, 64, 8, 8, 16, 16, 32, 32, 64, 64, 8, 8, 8, 16, 16, 32, 64, 4, 6, 6}
	if len(names) != int(numDTypes)-1 {
		t.Fatalf("%d names for %d dtypes", len(names), numDTypes-1)
	}
	for i, n := range names {
		d, ok := ParseDType(n)
		if !ok || d.String() != n || d.Bits() != bits[i] || !d.Valid() {
			t.Errorf("%s: %v %v %d", n, d, ok, d.Bits())
		}
	}
	for _, bad := range []string{"", "bf16", "F8", "F8_E4M3FN", "U128"} {
		if _, ok := ParseDType(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, nb, err := byteSize(F4, []int64{3}); !errors.Is(err, ErrSubByteAlignment) {
		t.Errorf("F4[3]: %d %v", nb, err)
	}
	if _, nb, err := byteSize(F6_E2M3, []int64{4, 3}); err != nil || nb != 9 {
		t.Errorf("F6[4,3]: %d %v", nb, err)
	}
	if _, _, err := byteSize(F32, []int64{1 << 40, 1 << 40}); !errors.Is(err, ErrNumelOverflow) {
		t.Errorf("overflow: %v", err)
	}
	if n, nb, err := byteSize(F32, []int64{1 << 62, 1 << 62, 0}); err != nil || n != 0 || nb != 0 {
		t.Errorf("zero dim after huge ones: %d %d %v", n, nb, err)
	}
	if _, _, err := byteSize(F64, []int64{1 << 60}); !errors.Is(err, ErrNumelOverflow) {
		t.Errorf("bits overflow: %v", err)
	}
}
