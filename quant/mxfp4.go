package quant

import (
	"fmt"

	"github.com/k3-project/k3/quant/mxfp4"
)

// mx is an mxfp4 matrix; the kernels (AVX2 with a pure-Go twin) live in
// quant/mxfp4.
type mx struct {
	rows, cols int
	packed     []byte // rows·cols/2
	scales     []byte // rows·cols/32 E8M0 bytes
}

// NewMXFP4 wraps MXFP4 weights: packed holds rows·cols/2 bytes of E2M1 codes
// (even column = low nibble), scales rows·cols/32 E8M0 bytes; cols % 32 == 0.
// Scale byte 255 makes its group contribute nothing (§6.2).
func NewMXFP4(rows, cols int, packed, scales []byte) (Matrix, error) {
	if err := checkDims(rows, cols); err != nil {
		return nil, err
	}
	if err := mxfp4.Check(rows, cols, len(packed), len(scales)); err != nil {
		return nil, fmt.Errorf("quant: mxfp4 [%d, %d]: %w", rows, cols, err)
	}
	return &mx{rows: rows, cols: cols, packed: packed[:len(packed):len(packed)], scales: scales[:len(scales):len(scales)]}, nil
}

func (m *mx) Format() Format { return MXFP4 }
func (m *mx) Rows() int      { return m.rows }
func (m *mx) Cols() int      { return m.cols }

func (m *mx) MatVec(dst, x []float32) {
	checkMatVec(MXFP4, "MatVec", m.rows, m.cols, len(dst), len(x))
	mxfp4.MatVec(dst, m.packed, m.scales, x)
}

func (m *mx) MatMul(dst []float32, stride int, x []float32, n int) {
	checkMatMul(MXFP4, "MatMul", m.rows, m.cols, len(dst), stride, len(x), n)
	if _, err := mxfp4.MatMul(dst, stride, m.packed, m.scales, x, n, m.rows, m.cols); err != nil {
		panic(fmt.Sprintf("quant.mxfp4.MatMul: %v", err)) // unreachable: shapes checked above and at bind
	}
}

func (m *mx) Slice(lo, hi int) Matrix {
	checkSlice("mxfp4", m.rows, lo, hi)
	pb, sb := m.cols/2, m.cols/mxfp4.GroupSize
	return &mx{rows: hi - lo, cols: m.cols, packed: m.packed[lo*pb : hi*pb : hi*pb], scales: m.scales[lo*sb : hi*sb : hi*sb]}
}

// DecodeRow writes E2M1(code)·2^(s−127) rounded once to float32 (+0 in
// groups whose scale byte is 255).
func (m *mx) DecodeRow(dst []float32, r int) {
	checkRow("mxfp4", m.rows, m.cols, r, len(dst))
	pb, sb := m.cols/2, m.cols/mxfp4.GroupSize
	if _, err := mxfp4.DequantizeRow(dst, m.packed[r*pb:(r+1)*pb], m.scales[r*sb:(r+1)*sb]); err != nil {
		panic(fmt.Sprintf("quant.mxfp4.DecodeRow: %v", err)) // unreachable: shapes checked
	}
}

// NaNScaleGroups counts the groups whose scale byte is 255 (they contribute
// nothing), for a check at bind time.
func (m *mx) NaNScaleGroups() int { return mxfp4.ScanScales(m.scales).NaNScaleGroups }
