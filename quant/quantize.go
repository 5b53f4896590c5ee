package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/k3-project/k3/quant/mxfp4"
)

// minScale is the floor of every integer and fp8 scale (§6.3 follows
// Colibrì's 1e−8): an all-zero row or block gets a tiny positive scale and
// all-zero codes instead of a division by zero.
const minScale = float32(1e-8)

// Quantize encodes a row-major [rows, cols] float32 matrix in format f (gs
// is the int4-grouped group size, ignored otherwise) and returns freshly
// allocated weight and scale bytes, ready for New(f, rows, cols, gs, ...).
// Plain formats return nil scales; bf16 and f16 round to nearest even.
// Non-finite weights are refused for the scaled formats.
func Quantize(f Format, w []float32, rows, cols, gs int) (weight, scale []byte, err error) {
	switch f {
	case F32:
		return encodePlain(f, w, rows, cols)
	case BF16:
		return encodePlain(f, w, rows, cols)
	case F16:
		return encodePlain(f, w, rows, cols)
	case Int8Row:
		return QuantizeInt8Row(w, rows, cols)
	case Int4Row:
		return QuantizeInt4Row(w, rows, cols)
	case Int4Grouped:
		return QuantizeInt4Grouped(w, rows, cols, gs)
	case FP8E4M3B128:
		return QuantizeFP8E4M3B128(w, rows, cols)
	case MXFP4:
		p, s, err := mxfp4.Quantize(w, rows, cols)
		if err != nil {
			return nil, nil, fmt.Errorf("quant: quantize mxfp4: %w", err)
		}
		return p, s, nil
	}
	if f.Coded() {
		return nil, nil, fmt.Errorf("%w: %s is a container: quantize the base format and use EncodeCoded", ErrCoded, f)
	}
	if f.Known() {
		return nil, nil, fmt.Errorf("%w: quantize %s (%s)", ErrNotImplemented, f, f.Status())
	}
	return nil, nil, fmt.Errorf("%w: ordinal %d", ErrUnknownFormat, uint8(f))
}

func checkQuantInput(f Format, w []float32, rows, cols int) error {
	if err := checkDims(rows, cols); err != nil {
		return err
	}
	if len(w) != rows*cols {
		return fmt.Errorf("%w: quantize %s [%d, %d]: %d weights, want %d", ErrShape, f, rows, cols, len(w), rows*cols)
	}
	if f == F32 || f == BF16 || f == F16 {
		return nil
	}
	for i, v := range w {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: quantize %s: element %d (row %d, col %d) is %v", ErrNonFinite, f, i, i/cols, i%cols, v)
		}
	}
	return nil
}

func encodePlain(f Format, w []float32, rows, cols int) ([]byte, []byte, error) {
	if err := checkQuantInput(f, w, rows, cols); err != nil {
		return nil, nil, err
	}
	if f == F32 {
		out := make([]byte, 4*len(w))
		for i, v := range w {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out, nil, nil
	}
	out := make([]byte, 2*len(w))
	for i, v := range w {
		var h uint16
		if f == BF16 {
			h = F32ToBF16(v)
		} else {
			h = F32ToF16(v)
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return out, nil, nil
}

// symScale returns max(amax/qmax, 1e−8) in float32 arithmetic.
func symScale(amax, qmax float32) float32 {
	return max(amax/qmax, minScale)
}

// roundClamp returns round-half-even(v/s) clamped to [−qmax, qmax].
func roundClamp(v, s float32, qmax float64) int {
	q := math.RoundToEven(float64(v) / float64(s))
	return int(max(-qmax, min(qmax, q)))
}

func amaxOf(w []float32) float32 {
	var a float32
	for _, v := range w {
		a = max(a, float32(math.Abs(float64(v))))
	}
	return a
}

// QuantizeInt8Row encodes w per row: scale = max(amax/127, 1e−8) (float32
// division), q = round-half-even(w/scale) ∈ [−127, 127] (the quotient is
// formed in float64). It returns rows·cols weight bytes and 4·rows scale
// bytes.
func QuantizeInt8Row(w []float32, rows, cols int) (q, scales []byte, err error) {
	if err := checkQuantInput(Int8Row, w, rows, cols); err != nil {
		return nil, nil, err
	}
	q = make([]byte, rows*cols)
	scales = make([]byte, 4*rows)
	for r := range rows {
		row := w[r*cols : (r+1)*cols]
		s := symScale(amaxOf(row), 127)
		binary.LittleEndian.PutUint32(scales[4*r:], math.Float32bits(s))
		for i, v := range row {
			q[r*cols+i] = byte(int8(roundClamp(v, s, 127)))
		}
	}
	return q, scales, nil
}

// QuantizeInt4Row encodes w per row with Colibrì's rule: scale =
// max(amax/7, 1e−8), value = round-half-even(w/scale) ∈ [−7, 7] (so −8 never
// occurs), stored as nibble value+8, even column in the low nibble. An odd
// cols leaves the last high nibble of each row as padding, written as 8
// (value 0). It returns rows·⌈cols/2⌉ weight bytes and 4·rows scale bytes.
func QuantizeInt4Row(w []float32, rows, cols int) (q, scales []byte, err error) {
	if err := checkQuantInput(Int4Row, w, rows, cols); err != nil {
		return nil, nil, err
	}
	rb := (cols + 1) / 2
	q = make([]byte, rows*rb)
	scales = make([]byte, 4*rows)
	for r := range rows {
		row := w[r*cols : (r+1)*cols]
		s := symScale(amaxOf(row), 7)
		binary.LittleEndian.PutUint32(scales[4*r:], math.Float32bits(s))
		putNibbles(q[r*rb:(r+1)*rb], row, func(int) float32 { return s })
	}
	return q, scales, nil
}

// putNibbles encodes row into offset-8 nibbles with the per-column scale
// scaleOf(column); an odd length pads the last high nibble with 8.
func putNibbles(dst []byte, row []float32, scaleOf func(int) float32) {
	for i := range dst {
		lo := byte(roundClamp(row[2*i], scaleOf(2*i), 7) + 8)
		hi := byte(8)
		if 2*i+1 < len(row) {
			hi = byte(roundClamp(row[2*i+1], scaleOf(2*i+1), 7) + 8)
		}
		dst[i] = lo | hi<<4
	}
}

// QuantizeInt4Grouped is QuantizeInt4Row with one scale per group of gs
// consecutive columns (the last group of a row may be short). It returns
// rows·⌈cols/2⌉ weight bytes and 4·rows·⌈cols/gs⌉ scale bytes.
func QuantizeInt4Grouped(w []float32, rows, cols, gs int) (q, scales []byte, err error) {
	if !ValidGroupSize(gs) {
		return nil, nil, fmt.Errorf("%w: int4-grouped gs = %d, want one of %v", ErrGroupSize, gs, groupSizes)
	}
	if err := checkQuantInput(Int4Grouped, w, rows, cols); err != nil {
		return nil, nil, err
	}
	rb, ng := (cols+1)/2, (cols+gs-1)/gs
	q = make([]byte, rows*rb)
	scales = make([]byte, 4*rows*ng)
	sc := make([]float32, ng)
	for r := range rows {
		row := w[r*cols : (r+1)*cols]
		for g := range ng {
			sc[g] = symScale(amaxOf(row[g*gs:min((g+1)*gs, cols)]), 7)
			binary.LittleEndian.PutUint32(scales[4*(r*ng+g):], math.Float32bits(sc[g]))
		}
		putNibbles(q[r*rb:(r+1)*rb], row, func(c int) float32 { return sc[c/gs] })
	}
	return q, scales, nil
}

// QuantizeFP8E4M3B128 encodes w per 128×128 block (edge blocks may be
// smaller): scale = max(amax/448, 1e−8) in float32 arithmetic, so the block
// maximum lands on the largest finite E4M3 value; each element becomes the
// nearest E4M3 value of w/scale (quotient in float64), ties to the even code,
// magnitudes beyond 448 (possible only through the rounding of the scale)
// saturate to 448, and zero encodes as +0. It returns rows·cols weight bytes
// and 4·⌈rows/128⌉·⌈cols/128⌉ scale bytes.
func QuantizeFP8E4M3B128(w []float32, rows, cols int) (q, scales []byte, err error) {
	if err := checkQuantInput(FP8E4M3B128, w, rows, cols); err != nil {
		return nil, nil, err
	}
	nbr, nbc := (rows+FP8Block-1)/FP8Block, (cols+FP8Block-1)/FP8Block
	q = make([]byte, rows*cols)
	scales = make([]byte, 4*nbr*nbc)
	for br := range nbr {
		for bc := range nbc {
			r0, r1 := br*FP8Block, min((br+1)*FP8Block, rows)
			c0, c1 := bc*FP8Block, min((bc+1)*FP8Block, cols)
			var amax float32
			for r := r0; r < r1; r++ {
				amax = max(amax, amaxOf(w[r*cols+c0:r*cols+c1]))
			}
			s := symScale(amax, fp8Max)
			binary.LittleEndian.PutUint32(scales[4*(br*nbc+bc):], math.Float32bits(s))
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					q[r*cols+c] = EncodeFP8E4M3(float64(w[r*cols+c]) / float64(s))
				}
			}
		}
	}
	return q, scales, nil
}

// Dequantize writes every element of m into dst (len Rows·Cols, row-major)
// with DecodeRow. It materialises the whole matrix and is meant for tests,
// tools and small matrices only.
func Dequantize(dst []float32, m Matrix) error {
	rows, cols := m.Rows(), m.Cols()
	if len(dst) != rows*cols {
		return fmt.Errorf("%w: dequantize %s [%d, %d]: dst has %d elements, want %d", ErrShape, m.Format(), rows, cols, len(dst), rows*cols)
	}
	d, ok := m.(RowDecoder)
	if !ok {
		return fmt.Errorf("%w: dequantize: %T has no DecodeRow", ErrNotImplemented, m)
	}
	for r := range rows {
		d.DecodeRow(dst[r*cols:(r+1)*cols], r)
	}
	return nil
}
