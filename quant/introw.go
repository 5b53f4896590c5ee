package quant

import (
	"encoding/binary"
	"math"

	"github.com/k3-project/k3/internal/kernels/f64pool"
	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// intRow is an int8-row or int4-row matrix: one F32 scale per row, y_o =
// f32(R16(q_o·x) · f64(scale_o)) with the R16 sum left unrounded (§6.3).
type intRow struct {
	f          Format
	rows, cols int
	rb         int    // weight bytes per row
	q          []byte // rows·rb weight bytes
	scales     []byte // 4·rows bytes, little-endian float32
	pure       bool   // force the pure-Go kernel (tests)
}

// NewInt8Row wraps int8-row weights (rows·cols two's-complement bytes) and
// their little-endian F32 row scales (4·rows bytes). Both are retained.
func NewInt8Row(rows, cols int, q, scales []byte) (Matrix, error) {
	return newIntRow(Int8Row, rows, cols, q, scales)
}

// NewInt4Row wraps int4-row weights (rows·⌈cols/2⌉ bytes of offset-8
// nibbles, even column = low nibble, an odd cols pads the last high nibble)
// and their little-endian F32 row scales (4·rows bytes).
func NewInt4Row(rows, cols int, q, scales []byte) (Matrix, error) {
	return newIntRow(Int4Row, rows, cols, q, scales)
}

func newIntRow(f Format, rows, cols int, q, scales []byte) (Matrix, error) {
	if err := checkBuffers(f, rows, cols, 0, q, scales); err != nil {
		return nil, err
	}
	rb := cols
	if f == Int4Row {
		rb = (cols + 1) / 2
	}
	return &intRow{f: f, rows: rows, cols: cols, rb: rb, q: q[:len(q):len(q)], scales: scales[:len(scales):len(scales)]}, nil
}

// checkBuffers validates weight and scale lengths against the expected-bytes
// functions of f.
func checkBuffers(f Format, rows, cols, gs int, q, scales []byte) error {
	wb, err := WeightBytes(f, rows, cols, gs)
	if err != nil {
		return err
	}
	sb, err := ScaleBytes(f, rows, cols, gs)
	if err != nil {
		return err
	}
	if err := checkLen("weight", f, rows, cols, len(q), wb, ErrWeightSize); err != nil {
		return err
	}
	return checkLen("scale", f, rows, cols, len(scales), sb, ErrScaleSize)
}

func f32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

func (m *intRow) Format() Format { return m.f }
func (m *intRow) Rows() int      { return m.rows }
func (m *intRow) Cols() int      { return m.cols }

func (m *intRow) row(r int, x []float64) float32 {
	q := m.q[r*m.rb : (r+1)*m.rb]
	var s float64
	switch {
	case m.f == Int8Row && m.pure:
		s = r16Int8Go(q, x)
	case m.f == Int8Row:
		s = r16Int8(q, x)
	case m.pure:
		s = r16Int4Go(q, x)
	default:
		s = r16Int4(q, x)
	}
	return float32(s * float64(f32At(m.scales, r)))
}

func (m *intRow) MatVec(dst, x []float32) {
	checkMatVec(m.f, "MatVec", m.rows, m.cols, len(dst), len(x))
	sp := f64pool.Get(len(x))
	xw := floatbits.Widen64(*sp, x)
	for r := range dst {
		dst[r] = m.row(r, xw)
	}
	f64pool.Put(sp)
}

func (m *intRow) MatMul(dst []float32, stride int, x []float32, n int) {
	checkMatMul(m.f, "MatMul", m.rows, m.cols, len(dst), stride, len(x), n)
	rowMatMul(m.rows, m.cols, dst, stride, x, n, m.row)
}

func (m *intRow) Slice(lo, hi int) Matrix {
	checkSlice(m.f.String(), m.rows, lo, hi)
	c := *m
	c.rows = hi - lo
	c.q = m.q[lo*m.rb : hi*m.rb : hi*m.rb]
	c.scales = m.scales[4*lo : 4*hi : 4*hi]
	return &c
}

func (m *intRow) DecodeRow(dst []float32, r int) {
	checkRow(m.f.String(), m.rows, m.cols, r, len(dst))
	q := m.q[r*m.rb : (r+1)*m.rb]
	s := float64(f32At(m.scales, r))
	for i := range dst {
		var v float64
		if m.f == Int8Row {
			v = float64(int8(q[i]))
		} else {
			v = nibAt(q, i)
		}
		dst[i] = float32(v * s)
	}
}
