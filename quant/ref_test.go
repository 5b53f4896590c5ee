package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/k3-project/k3/internal/testkit"
)

// Independent reference implementations for the tests. They decode elements
// from the bytes with their own bit-level code and sum in the canonical
// orders of §5.2 using plain arrays, sharing nothing with the kernels; the
// R16 sum itself is testkit.RefR16, the reference of every package's kernels.

// refRG sums groups of g; skip(gi) drops a group entirely (mxfp4 scale 255).
func refRG(w []float64, x []float32, g int, scale func(gi int) float64, skip func(gi int) bool) float32 {
	var acc float64
	for gi := 0; gi*g < len(x); gi++ {
		lo, hi := gi*g, min((gi+1)*g, len(x))
		if skip != nil && skip(gi) {
			continue
		}
		var s [8]float64
		n := hi - lo
		m := 8 * (n / 8)
		for j := 0; j < m; j++ {
			s[j%8] += w[lo+j] * float64(x[lo+j])
		}
		sub := ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))
		for j := m; j < n; j++ {
			sub += w[lo+j] * float64(x[lo+j])
		}
		acc += float64(sub * scale(gi))
	}
	return float32(acc)
}

// refFP8 decodes an E4M3 byte by assembling float32 bits directly.
func refFP8(b byte) float32 {
	sign := uint32(b>>7) << 31
	e := uint32(b>>3) & 15
	m := uint32(b) & 7
	switch {
	case e == 15 && m == 7:
		return float32(math.NaN())
	case e == 0 && m == 0:
		return math.Float32frombits(sign)
	case e == 0:
		// m·2^−9: normalise the 3-bit mantissa.
		exp := uint32(127 - 9)
		for m&8 == 0 {
			m <<= 1
			exp--
		}
		return math.Float32frombits(sign | (exp+3)<<23 | (m&7)<<20)
	}
	return math.Float32frombits(sign | (e+120)<<23 | m<<20)
}

// refF16 is testkit.RefF16 in float32, where every binary16 value is exact.
func refF16(h uint16) float32 { return float32(testkit.RefF16(h)) }

func refNib(q []byte, i int) float64 {
	return float64(int(q[i/2]>>(4*(i%2))&15) - 8)
}

var refE2M1 = [8]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}

func refMX(q []byte, i int) float64 {
	c := q[i/2] >> (4 * (i % 2)) & 15
	v := refE2M1[c&7]
	if c&8 != 0 {
		v = -v
	}
	return v
}

func le32(b []byte, i int) float64 {
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
}

// refMatVec computes the reference output of a matrix in format f from its
// bytes.
func refMatVec(f Format, rows, cols, gs int, w, sc []byte, x []float32) []float32 {
	out := make([]float32, rows)
	vals := make([]float64, cols)
	for r := range rows {
		switch f {
		case F32:
			for i := range vals {
				vals[i] = le32(w, r*cols+i)
			}
			out[r] = float32(testkit.RefR16(vals, x))
		case BF16:
			for i := range vals {
				vals[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(w[2*(r*cols+i):])) << 16))
			}
			out[r] = float32(testkit.RefR16(vals, x))
		case F16:
			for i := range vals {
				vals[i] = float64(refF16(binary.LittleEndian.Uint16(w[2*(r*cols+i):])))
			}
			out[r] = float32(testkit.RefR16(vals, x))
		case Int8Row:
			for i := range vals {
				vals[i] = float64(int8(w[r*cols+i]))
			}
			out[r] = float32(testkit.RefR16(vals, x) * le32(sc, r))
		case Int4Row:
			rb := (cols + 1) / 2
			for i := range vals {
				vals[i] = refNib(w[r*rb:], i)
			}
			out[r] = float32(testkit.RefR16(vals, x) * le32(sc, r))
		case Int4Grouped:
			rb, ng := (cols+1)/2, (cols+gs-1)/gs
			for i := range vals {
				vals[i] = refNib(w[r*rb:], i)
			}
			out[r] = refRG(vals, x, gs, func(g int) float64 { return le32(sc, r*ng+g) }, nil)
		case FP8E4M3B128:
			nbc := (cols + 127) / 128
			for i := range vals {
				vals[i] = float64(refFP8(w[r*cols+i]))
			}
			out[r] = refRG(vals, x, 128, func(g int) float64 { return le32(sc, (r/128)*nbc+g) }, nil)
		case MXFP4:
			ng := cols / 32
			for i := range vals {
				vals[i] = refMX(w[r*cols/2:], i)
			}
			out[r] = refRG(vals, x, 32,
				func(g int) float64 { return math.Ldexp(1, int(sc[r*ng+g])-127) },
				func(g int) bool { return sc[r*ng+g] == 255 })
		default:
			panic("refMatVec: " + f.String())
		}
	}
	return out
}

// randFloats returns n values spanning several binades, with signs, so that
// the summation order shows in the last bits.
func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(12)-6))
	}
	return v
}

// wideFloats returns activations spanning 2^±24 with signs: sums of their
// products cancel heavily, so any change of summation order changes the
// float32 result in most rows (a test with narrow data would not notice).
func wideFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(48)-24))
	}
	return v
}

// implemented formats exercised by the generic tests, with a group size.
type fmtCase struct {
	f  Format
	gs int
}

func allCases() []fmtCase {
	cs := []fmtCase{{F32, 0}, {BF16, 0}, {F16, 0}, {Int8Row, 0}, {Int4Row, 0}, {FP8E4M3B128, 0}, {MXFP4, 0}}
	for _, gs := range groupSizes {
		cs = append(cs, fmtCase{Int4Grouped, gs})
	}
	return cs
}

func (c fmtCase) String() string {
	if c.f == Int4Grouped {
		return c.f.String() + "-" + itoa(c.gs)
	}
	return c.f.String()
}

func itoa(i int) string {
	return string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

// shapes returns test shapes for a format, with awkward tails.
func shapes(f Format) [][2]int {
	if f == MXFP4 {
		return [][2]int{{1, 32}, {3, 64}, {17, 96}, {130, 160}, {5, 352}}
	}
	return [][2]int{{1, 1}, {1, 7}, {2, 15}, {3, 16}, {5, 17}, {4, 31}, {7, 33}, {3, 63}, {9, 100},
		{1, 127}, {2, 128}, {3, 129}, {130, 200}, {257, 131}, {4, 300}, {2, 513}}
}

// plantSpikes makes elements 0 and 5 of every row the same nonzero weight
// (one) and returns activations whose elements 0 and 5 are ±2^60. The huge
// products cancel only where the canonical tree brings them together; the
// small terms absorbed on the way decide the result, which is then small, so
// any other lane map or tree changes the float32 output. Without this,
// float64 sums of test data are almost always exact or lose only bits that
// float32 rounding discards.
func plantSpikes(f Format, rows, cols int, wb []byte, x []float32) {
	if cols < 6 {
		return
	}
	for r := range rows {
		switch f {
		case F32:
			binary.LittleEndian.PutUint32(wb[4*r*cols:], math.Float32bits(1))
			binary.LittleEndian.PutUint32(wb[4*(r*cols+5):], math.Float32bits(1))
		case BF16:
			binary.LittleEndian.PutUint16(wb[2*r*cols:], 0x3f80)
			binary.LittleEndian.PutUint16(wb[2*(r*cols+5):], 0x3f80)
		case F16:
			binary.LittleEndian.PutUint16(wb[2*r*cols:], 0x3c00)
			binary.LittleEndian.PutUint16(wb[2*(r*cols+5):], 0x3c00)
		case Int8Row:
			wb[r*cols], wb[r*cols+5] = 1, 1
		case Int4Row, Int4Grouped:
			rb := (cols + 1) / 2
			wb[r*rb] = wb[r*rb]&0xf0 | 9
			wb[r*rb+2] = wb[r*rb+2]&0x0f | 9<<4
		case FP8E4M3B128:
			wb[r*cols], wb[r*cols+5] = 0x38, 0x38
		case MXFP4:
			rb := cols / 2
			wb[r*rb] = wb[r*rb]&0xf0 | 2
			wb[r*rb+2] = wb[r*rb+2]&0x0f | 2<<4
		}
	}
	x[0], x[5] = 1<<60, -(1 << 60)
}

// plantGroupSpikes makes element 0 and element g (the first of the second
// group) of every row weight one, gives the second group of every row the
// first group's scale, and sets x[0] = 2^40, x[g] = −2^40. With the other
// activations small, the two scaled group sums nearly cancel and the rounding
// of each sub·scale product decides the float32 result, so a kernel that
// fuses the product into the accumulation (an FMA) differs from the
// canonical acc += f64(sub·scale).
func plantGroupSpikes(f Format, rows, cols, g int, wb, sb []byte, x []float32) {
	if cols <= g {
		return
	}
	switch f {
	case Int4Grouped:
		rb, ng := (cols+1)/2, (cols+g-1)/g
		for r := range rows {
			wb[r*rb] = wb[r*rb]&0xf0 | 9
			wb[r*rb+g/2] = wb[r*rb+g/2]&0xf0 | 9
			copy(sb[4*(r*ng+1):4*(r*ng+2)], sb[4*r*ng:4*(r*ng+1)])
		}
	case FP8E4M3B128:
		nbc := (cols + g - 1) / g
		for r := range rows {
			wb[r*cols], wb[r*cols+g] = 0x38, 0x38
		}
		for br := 0; br*g < rows; br++ {
			copy(sb[4*(br*nbc+1):4*(br*nbc+2)], sb[4*br*nbc:4*(br*nbc+1)])
		}
	default:
		return
	}
	x[0], x[g] = 1<<40, -(1 << 40)
}
