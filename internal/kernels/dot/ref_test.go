package dot

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/k3-project/k3/internal/testkit"
)

// This file is the independent reference for the tests: a direct reading of
// §5.1/§5.2 written without the helpers of the package under test.

func refBF16(h uint16) float64 {
	return float64(math.Float32frombits(uint32(h) << 16))
}

// refR16 is R16 over already-widened weights.
func refR16(w []float64, x []float32) float32 {
	return float32(testkit.RefR16(w, x))
}

// format describes one weight encoding for table-driven tests.
type format struct {
	name   string
	size   int
	widen  func(w []byte, i int) float64 // independent reference widening
	dot    func(w []byte, x []float32) float32
	gen    func(w []byte, x []float32) float32
	matVec func(dst []float32, w []byte, x []float32)
	matMul func(dst []float32, stride int, w []byte, x []float32, n int)
	random func(r *rand.Rand, special bool) []byte // one element's bytes
}

var formats = []format{
	{
		name: "F32", size: 4,
		widen: func(w []byte, i int) float64 {
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])))
		},
		dot: F32, gen: genericF32, matVec: MatVecF32, matMul: MatMulF32,
		random: func(r *rand.Rand, special bool) []byte {
			return binary.LittleEndian.AppendUint32(nil, math.Float32bits(randF32(r, special)))
		},
	},
	{
		name: "BF16", size: 2,
		widen: func(w []byte, i int) float64 { return refBF16(binary.LittleEndian.Uint16(w[2*i:])) },
		dot:   BF16, gen: genericBF16, matVec: MatVecBF16, matMul: MatMulBF16,
		random: func(r *rand.Rand, special bool) []byte {
			return binary.LittleEndian.AppendUint16(nil, randBF16(r, special))
		},
	},
	{
		name: "F16", size: 2,
		widen: func(w []byte, i int) float64 { return testkit.RefF16(binary.LittleEndian.Uint16(w[2*i:])) },
		dot:   F16, gen: genericF16, matVec: MatVecF16, matMul: MatMulF16,
		random: func(r *rand.Rand, special bool) []byte {
			return binary.LittleEndian.AppendUint16(nil, randF16(r, special))
		},
	},
}

// randF32 returns values with a wide exponent spread and random signs, so
// that summation order shows in the last bits; with special set, one value
// in eight is NaN, ±Inf, ±0 or a subnormal.
func randF32(r *rand.Rand, special bool) float32 {
	if special && r.IntN(8) == 0 {
		return []float32{
			float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
			0, float32(math.Copysign(0, -1)), math.Float32frombits(1),
			-math.Float32frombits(0x007fffff), math.MaxFloat32,
		}[r.IntN(8)]
	}
	v := float32(math.Ldexp(r.Float64()+0.5, r.IntN(41)-20))
	if r.IntN(2) == 0 {
		v = -v
	}
	return v
}

func randBF16(r *rand.Rand, special bool) uint16 {
	if special && r.IntN(8) == 0 {
		return []uint16{0x7fc0, 0x7f81, 0xffc1, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x807f, 0x7f7f}[r.IntN(10)]
	}
	return uint16(math.Float32bits(randF32(r, false)) >> 16)
}

func randF16(r *rand.Rand, special bool) uint16 {
	if special && r.IntN(8) == 0 {
		return []uint16{0x7e00, 0x7c01, 0xfe01, 0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001, 0x83ff, 0x7bff}[r.IntN(10)]
	}
	// Random finite halves: any exponent 0..30, any mantissa, any sign.
	return uint16(r.IntN(2))<<15 | uint16(r.IntN(31))<<10 | uint16(r.IntN(1024))
}

func randX(r *rand.Rand, n int, special bool) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = randF32(r, special)
	}
	return x
}

// randW returns rows·cols random weights of f starting at byte offset off of
// a fresh buffer, so the kernels see unaligned rows.
func randW(r *rand.Rand, f format, rows, cols, off int, special bool) []byte {
	buf := make([]byte, off, off+rows*cols*f.size)
	for range rows * cols {
		buf = append(buf, f.random(r, special)...)
	}
	return buf[off:]
}

func refRow(f format, w []byte, x []float32) float32 {
	wf := make([]float64, len(x))
	for i := range wf {
		wf[i] = f.widen(w, i)
	}
	return refR16(wf, x)
}

// sameBits reports whether a and b are bit-identical, treating any two NaNs
// as equal (NaN payload propagation through adds is not specified by Go).
func sameBits(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func sameBits64(a, b float64) bool {
	if a != a && b != b {
		return true
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

// cancel rewrites the last two elements so that the dot product nearly
// cancels: weights 1 and x = -hi, -lo where hi+lo is the sum of the other
// products split into two float32s. What remains is of the order of the f64
// rounding errors of the sum, so the f32 result depends on the exact
// summation order. It needs len(x) >= 3 and finite data.
func cancel(f format, w []byte, x []float32) {
	n := len(x)
	if n < 3 {
		return
	}
	var one []byte
	switch f.name {
	case "F32":
		one = []byte{0, 0, 0x80, 0x3f}
	case "BF16":
		one = []byte{0x80, 0x3f}
	case "F16":
		one = []byte{0x00, 0x3c}
	}
	copy(w[(n-2)*f.size:], one)
	copy(w[(n-1)*f.size:], one)
	var s float64
	for i := range n - 2 {
		s += f.widen(w, i) * float64(x[i])
	}
	hi := float32(s)
	x[n-2] = -hi
	x[n-1] = -float32(s - float64(hi))
}
