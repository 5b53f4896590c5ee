package quant

import (
	"fmt"

	"github.com/k3-project/k3/quant/lossless12"
)

// ll12 is a lossless12 matrix (§6.11); the format and its kernels live in
// quant/lossless12.
type ll12 struct {
	m *lossless12.Matrix
}

var (
	_ RowRanger  = (*ll12)(nil)
	_ RowDecoder = (*ll12)(nil)
)

// NewLossless12 checks the lossless12 bytes of a [rows, cols] matrix (the
// output of lossless12.Encode: header, every block, every escape) and wraps
// them. Its kernels give, bit for bit, what NewBF16 gives on the bf16
// weights that were encoded. data is retained, not copied.
func NewLossless12(rows, cols int, data []byte) (Matrix, error) {
	if err := checkDims(rows, cols); err != nil {
		return nil, err
	}
	m, err := lossless12.Open(data[:len(data):len(data)])
	if err != nil {
		return nil, fmt.Errorf("quant: lossless12 [%d, %d]: %w", rows, cols, err)
	}
	if m.Rows() != rows || m.Cols() != cols {
		return nil, fmt.Errorf("%w: lossless12 header says [%d, %d], want [%d, %d]", ErrShape, m.Rows(), m.Cols(), rows, cols)
	}
	return &ll12{m: m}, nil
}

// NewLossless12Rows checks and wraps rows of a lossless12 matrix without its
// header (lossless12.OpenRows): data holds whole rows of cols columns with
// escapes escape bytes each, as a streamed piece of a matrix does. The
// caller has checked the header of the whole matrix.
func NewLossless12Rows(rows, cols, escapes int, data []byte) (Matrix, error) {
	if err := checkDims(rows, cols); err != nil {
		return nil, err
	}
	m, err := lossless12.OpenRows(cols, escapes, data)
	if err != nil {
		return nil, fmt.Errorf("quant: lossless12 rows [%d, %d]: %w", rows, cols, err)
	}
	if m.Rows() != rows {
		return nil, fmt.Errorf("%w: lossless12 rows: %d bytes hold %d rows, want %d", ErrShape, len(data), m.Rows(), rows)
	}
	return &ll12{m: m}, nil
}

func (m *ll12) Format() Format { return Lossless12 }
func (m *ll12) Rows() int      { return m.m.Rows() }
func (m *ll12) Cols() int      { return m.m.Cols() }

func (m *ll12) MatVec(dst, x []float32) {
	checkMatVec(Lossless12, "MatVec", m.Rows(), m.Cols(), len(dst), len(x))
	m.m.MatVec(dst, x)
}

func (m *ll12) MatMul(dst []float32, stride int, x []float32, n int) {
	checkMatMul(Lossless12, "MatMul", m.Rows(), m.Cols(), len(dst), stride, len(x), n)
	m.m.MatMul(dst, stride, x, n)
}

func (m *ll12) Slice(lo, hi int) Matrix {
	checkSlice("lossless12", m.Rows(), lo, hi)
	return &ll12{m: m.m.Slice(lo, hi)}
}

// MatVecRows implements RowRanger: Slice(lo, hi).MatVec without the view.
func (m *ll12) MatVecRows(dst, x []float32, lo, hi int) {
	checkSlice("lossless12", m.Rows(), lo, hi)
	checkMatVec(Lossless12, "MatVecRows", hi-lo, m.Cols(), len(dst), len(x))
	m.m.MatVecRows(dst, x, lo, hi)
}

// MatMulRows implements RowRanger: Slice(lo, hi).MatMul without the view.
func (m *ll12) MatMulRows(dst []float32, stride int, x []float32, n, lo, hi int) {
	checkSlice("lossless12", m.Rows(), lo, hi)
	checkMatMul(Lossless12, "MatMulRows", hi-lo, m.Cols(), len(dst), stride, len(x), n)
	m.m.MatMulRows(dst, stride, x, n, lo, hi)
}

// DecodeRow writes the exact widened bf16 values of row r.
func (m *ll12) DecodeRow(dst []float32, r int) {
	checkRow("lossless12", m.Rows(), m.Cols(), r, len(dst))
	m.m.DecodeRow(dst, r)
}
