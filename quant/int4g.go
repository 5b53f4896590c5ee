package quant

import (
	"github.com/k3-project/k3/internal/kernels/f64pool"
	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// int4Grouped is an int4-grouped matrix: offset-8 nibbles packed like
// int4-row, F32 scales [O, ⌈I/gs⌉], RG with g = gs; the last group of a row
// may be short (§6.3).
type int4Grouped struct {
	rows, cols int
	gs, ng     int    // group size, groups per row
	rb         int    // weight bytes per row
	q          []byte // rows·rb bytes
	scales     []byte // 4·rows·ng bytes, little-endian float32
	pure       bool
}

// NewInt4Grouped wraps int4-grouped weights (rows·⌈cols/2⌉ bytes) with group
// size gs ∈ {16, 32, 48, 64, 96, 128, 192, 256} and their little-endian F32
// scales (4·rows·⌈cols/gs⌉ bytes, row-major).
func NewInt4Grouped(rows, cols, gs int, q, scales []byte) (Matrix, error) {
	if err := checkBuffers(Int4Grouped, rows, cols, gs, q, scales); err != nil {
		return nil, err
	}
	return &int4Grouped{rows: rows, cols: cols, gs: gs, ng: (cols + gs - 1) / gs, rb: (cols + 1) / 2,
		q: q[:len(q):len(q)], scales: scales[:len(scales):len(scales)]}, nil
}

// GroupSize returns gs.
func (m *int4Grouped) GroupSize() int { return m.gs }

func (m *int4Grouped) Format() Format { return Int4Grouped }
func (m *int4Grouped) Rows() int      { return m.rows }
func (m *int4Grouped) Cols() int      { return m.cols }

func (m *int4Grouped) row(r int, x []float64) float32 {
	q := m.q[r*m.rb : (r+1)*m.rb]
	sc := m.scales[4*r*m.ng : 4*(r+1)*m.ng]
	if m.pure {
		return float32(rgInt4RowGo(q, x, sc, m.gs))
	}
	return float32(rgInt4Row(q, x, sc, m.gs))
}

func (m *int4Grouped) MatVec(dst, x []float32) {
	checkMatVec(Int4Grouped, "MatVec", m.rows, m.cols, len(dst), len(x))
	sp := f64pool.Get(len(x))
	xw := floatbits.Widen64(*sp, x)
	for r := range dst {
		dst[r] = m.row(r, xw)
	}
	f64pool.Put(sp)
}

func (m *int4Grouped) MatMul(dst []float32, stride int, x []float32, n int) {
	checkMatMul(Int4Grouped, "MatMul", m.rows, m.cols, len(dst), stride, len(x), n)
	rowMatMul(m.rows, m.cols, dst, stride, x, n, m.row)
}

func (m *int4Grouped) Slice(lo, hi int) Matrix {
	checkSlice("int4-grouped", m.rows, lo, hi)
	c := *m
	c.rows = hi - lo
	c.q = m.q[lo*m.rb : hi*m.rb : hi*m.rb]
	c.scales = m.scales[4*lo*m.ng : 4*hi*m.ng : 4*hi*m.ng]
	return &c
}

func (m *int4Grouped) DecodeRow(dst []float32, r int) {
	checkRow("int4-grouped", m.rows, m.cols, r, len(dst))
	q := m.q[r*m.rb : (r+1)*m.rb]
	sc := m.scales[4*r*m.ng:]
	for i := range dst {
		dst[i] = float32(nibAt(q, i) * float64(f32At(sc, i/m.gs)))
	}
}
