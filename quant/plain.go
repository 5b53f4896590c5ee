package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/k3-project/k3/internal/kernels/dot"
	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// plain is an f32, bf16 or f16 matrix: R16 over the widened weights
// (§6.5), computed by internal/kernels/dot straight from the little-endian bytes.
type plain struct {
	f          Format
	rows, cols int
	esize      int // bytes per element
	data       []byte
}

// NewF32 wraps little-endian float32 bytes of a [rows, cols] matrix
// (len(data) must be 4·rows·cols). data is retained, not copied.
func NewF32(rows, cols int, data []byte) (Matrix, error) { return newPlain(F32, rows, cols, data) }

// NewBF16 wraps little-endian bfloat16 bytes (len(data) = 2·rows·cols).
func NewBF16(rows, cols int, data []byte) (Matrix, error) { return newPlain(BF16, rows, cols, data) }

// NewF16 wraps little-endian IEEE binary16 bytes (len(data) = 2·rows·cols).
func NewF16(rows, cols int, data []byte) (Matrix, error) { return newPlain(F16, rows, cols, data) }

// F32FromFloats encodes w (row-major, len rows·cols) as a new f32 matrix.
func F32FromFloats(rows, cols int, w []float32) (Matrix, error) {
	if err := checkDims(rows, cols); err != nil {
		return nil, err
	}
	if len(w) != rows*cols {
		return nil, fmt.Errorf("%w: f32 [%d, %d] needs %d floats, got %d", ErrShape, rows, cols, rows*cols, len(w))
	}
	data := make([]byte, 4*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return newPlain(F32, rows, cols, data)
}

func newPlain(f Format, rows, cols int, data []byte) (Matrix, error) {
	want, err := WeightBytes(f, rows, cols, 0)
	if err != nil {
		return nil, err
	}
	if err := checkLen("weight", f, rows, cols, len(data), want, ErrWeightSize); err != nil {
		return nil, err
	}
	es := 2
	if f == F32 {
		es = 4
	}
	return &plain{f: f, rows: rows, cols: cols, esize: es, data: data[:len(data):len(data)]}, nil
}

func (m *plain) Format() Format { return m.f }
func (m *plain) Rows() int      { return m.rows }
func (m *plain) Cols() int      { return m.cols }

func (m *plain) MatVec(dst, x []float32) {
	checkMatVec(m.f, "MatVec", m.rows, m.cols, len(dst), len(x))
	if m.cols == 0 {
		clear(dst)
		return
	}
	switch m.f {
	case F32:
		dot.MatVecF32(dst, m.data, x)
	case BF16:
		dot.MatVecBF16(dst, m.data, x)
	default:
		dot.MatVecF16(dst, m.data, x)
	}
}

func (m *plain) MatMul(dst []float32, stride int, x []float32, n int) {
	checkMatMul(m.f, "MatMul", m.rows, m.cols, len(dst), stride, len(x), n)
	if m.rows == 0 || n == 0 {
		return
	}
	if m.cols == 0 {
		for t := range n {
			clear(dst[t*stride : t*stride+m.rows])
		}
		return
	}
	switch m.f {
	case F32:
		dot.MatMulF32(dst, stride, m.data, x, n)
	case BF16:
		dot.MatMulBF16(dst, stride, m.data, x, n)
	default:
		dot.MatMulF16(dst, stride, m.data, x, n)
	}
}

func (m *plain) Slice(lo, hi int) Matrix {
	checkSlice(m.f.String(), m.rows, lo, hi)
	rb := m.cols * m.esize
	return &plain{f: m.f, rows: hi - lo, cols: m.cols, esize: m.esize, data: m.data[lo*rb : hi*rb : hi*rb]}
}

// MatVecRows implements RowRanger: Slice(lo, hi).MatVec without the view.
func (m *plain) MatVecRows(dst, x []float32, lo, hi int) {
	v := m.rowsView(lo, hi)
	v.MatVec(dst, x)
}

// MatMulRows implements RowRanger: Slice(lo, hi).MatMul without the view.
func (m *plain) MatMulRows(dst []float32, stride int, x []float32, n, lo, hi int) {
	v := m.rowsView(lo, hi)
	v.MatMul(dst, stride, x, n)
}

// rowsView is Slice(lo, hi) as a value, which stays on the caller's stack.
func (m *plain) rowsView(lo, hi int) plain {
	checkSlice(m.f.String(), m.rows, lo, hi)
	rb := m.cols * m.esize
	return plain{f: m.f, rows: hi - lo, cols: m.cols, esize: m.esize, data: m.data[lo*rb : hi*rb : hi*rb]}
}

func (m *plain) DecodeRow(dst []float32, r int) {
	checkRow(m.f.String(), m.rows, m.cols, r, len(dst))
	rb := m.cols * m.esize
	row := m.data[r*rb : (r+1)*rb]
	// One loop per format: MLA decodes a weight row per head every step, so
	// the format switch stays out of the element loop.
	switch m.f {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = floatbits.BF16(binary.LittleEndian.Uint16(row[2*i:]))
		}
	default:
		for i := range dst {
			dst[i] = floatbits.F16(binary.LittleEndian.Uint16(row[2*i:]))
		}
	}
}
