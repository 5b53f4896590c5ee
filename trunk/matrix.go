package trunk

import (
	"fmt"
	"math"
	"sync"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
)

// Matrix is a streamed weight matrix: rows [lo, hi) of a tensor whose row ranges (pieces) are
// leased from the ring while a kernel runs over them. It is a quant.Matrix, so the layer math uses
// it like any other; quant.MatVecParallel and MatMulParallel hand it whole calls
// (quant.Scheduler), and it splits each piece's rows over the workers itself, so every output row
// is computed by the same kernel over the same bytes as with a resident matrix.
//
// Its methods cannot return errors: when a piece cannot be read, the rows it covers are set to
// NaN and the error is recorded in the Store (Store.Err), which the caller checks after every
// layer. No value computed from unread bytes is ever reported as a result.
type Matrix struct {
	s           *Store
	t           *Tensor
	rows        int // of the whole tensor
	lo, hi      int // this view's rows
	first, last int // pieces [first, last) cover the tensor
	per         int // rows per piece (the last may have fewer)
}

var (
	_ quant.Matrix     = (*Matrix)(nil)
	_ quant.Scheduler  = (*Matrix)(nil)
	_ quant.RowDecoder = (*Matrix)(nil)
)

// Format implements quant.Matrix.
func (m *Matrix) Format() quant.Format {
	switch m.t.DType {
	case safetensors.BF16:
		return quant.BF16
	case safetensors.F16:
		return quant.F16
	case safetensors.U8:
		return m.t.Format // checked at Open: quant.Lossless12
	}
	return quant.F32
}

// Rows implements quant.Matrix.
func (m *Matrix) Rows() int { return m.hi - m.lo }

// Cols implements quant.Matrix.
func (m *Matrix) Cols() int { return m.t.Cols }

// Slice implements quant.Matrix; the view shares the pieces.
func (m *Matrix) Slice(lo, hi int) quant.Matrix {
	if lo < 0 || hi < lo || hi > m.Rows() {
		panic(fmt.Sprintf("trunk.Matrix.Slice(%d, %d): out of range for %d rows", lo, hi, m.Rows()))
	}
	v := *m
	v.lo, v.hi = m.lo+lo, m.lo+hi
	return &v
}

// MatVec implements quant.Matrix.
func (m *Matrix) MatVec(dst, x []float32) { m.MatVecWorkers(dst, x, 1) }

// MatMul implements quant.Matrix.
func (m *Matrix) MatMul(dst []float32, stride int, x []float32, n int) {
	m.MatMulWorkers(dst, stride, x, n, 1)
}

// MatVecWorkers implements quant.Scheduler.
func (m *Matrix) MatVecWorkers(dst, x []float32, workers int) {
	if len(dst) != m.Rows() || len(x) != m.Cols() {
		panic(fmt.Sprintf("trunk.Matrix.MatVec %s: len(dst)=%d len(x)=%d, want %d and %d", m.t.Name, len(dst), len(x), m.Rows(), m.Cols()))
	}
	m.each(func(v quant.Matrix, r0, r1 int) {
		quant.MatVecOn(m.s.opts.Runner, v, dst[r0-m.lo:r1-m.lo], x, workers)
	}, func(r0, r1 int) { fillNaN(dst[r0-m.lo : r1-m.lo]) })
}

// MatMulWorkers implements quant.Scheduler.
func (m *Matrix) MatMulWorkers(dst []float32, stride int, x []float32, n, workers int) {
	if n < 0 || stride < m.Rows() || len(x) != n*m.Cols() || (n > 0 && len(dst) < (n-1)*stride+m.Rows()) {
		panic(fmt.Sprintf("trunk.Matrix.MatMul %s: n=%d stride=%d len(x)=%d len(dst)=%d for [%d, %d]",
			m.t.Name, n, stride, len(x), len(dst), m.Rows(), m.Cols()))
	}
	if n == 0 {
		return
	}
	m.each(func(v quant.Matrix, r0, r1 int) {
		quant.MatMulOn(m.s.opts.Runner, v, dst[r0-m.lo:], stride, x, n, workers)
	}, func(r0, r1 int) {
		for t := range n {
			fillNaN(dst[t*stride+r0-m.lo : t*stride+r1-m.lo])
		}
	})
}

// DecodeRow implements quant.RowDecoder.
func (m *Matrix) DecodeRow(dst []float32, r int) {
	if r < 0 || r >= m.Rows() || len(dst) != m.Cols() {
		panic(fmt.Sprintf("trunk.Matrix.DecodeRow %s: row %d of %d, len(dst)=%d want %d", m.t.Name, r, m.Rows(), len(dst), m.Cols()))
	}
	row := m.lo + r
	pc := m.first + row/m.per
	v, i, err := m.s.acquire(pc)
	if err != nil {
		m.s.fail(err)
		fillNaN(dst)
		return
	}
	v.(quant.RowDecoder).DecodeRow(dst, row-m.s.pieces[pc].r0)
	m.s.release(i)
}

// each runs fn over the view's rows piece by piece, each piece leased for the duration of its
// call; bad is called for the rows of a piece that could not be read.
func (m *Matrix) each(fn func(v quant.Matrix, r0, r1 int), bad func(r0, r1 int)) {
	for pc := m.first + m.lo/m.per; pc < m.last; pc++ {
		p := &m.s.pieces[pc]
		r0, r1 := max(p.r0, m.lo), min(p.r1, m.hi)
		if r0 >= r1 {
			break
		}
		v, i, err := m.s.acquire(pc)
		if err != nil {
			m.s.fail(err)
			bad(r0, r1)
			continue
		}
		if r0 != p.r0 || r1 != p.r1 {
			v = v.Slice(r0-p.r0, r1-p.r0)
		}
		fn(v, r0, r1)
		m.s.release(i)
	}
}

func fillNaN(d []float32) {
	nan := float32(math.NaN())
	for i := range d {
		d[i] = nan
	}
}

// rowReader is a streamed embedding table: DecodeRow reads one row from disk (buffered; a row is a
// few kilobytes and the page cache may keep frequent ones). It supports nothing else.
type rowReader struct {
	s    *Store
	t    *Tensor
	f    *openFile
	ctor func(int, int, []byte) (quant.Matrix, error)
	mu   sync.Mutex // guards buf
	buf  *arena     // one aligned row window
}

func (r *rowReader) Format() quant.Format { return (&Matrix{t: r.t}).Format() }
func (r *rowReader) Rows() int            { return r.t.Rows }
func (r *rowReader) Cols() int            { return r.t.Cols }
func (r *rowReader) MatVec([]float32, []float32) {
	panic("trunk: the streamed embedding table only decodes rows")
}
func (r *rowReader) MatMul([]float32, int, []float32, int) {
	panic("trunk: the streamed embedding table only decodes rows")
}
func (r *rowReader) Slice(int, int) quant.Matrix {
	panic("trunk: the streamed embedding table only decodes rows")
}

// DecodeRow reads and widens row id.
func (r *rowReader) DecodeRow(dst []float32, id int) {
	if id < 0 || id >= r.t.Rows || len(dst) != r.t.Cols {
		panic(fmt.Sprintf("trunk: embedding row %d of %d, len(dst)=%d want %d", id, r.t.Rows, len(dst), r.t.Cols))
	}
	rb := r.t.rowBytes()
	r.mu.Lock()
	defer r.mu.Unlock()
	// A packed table's run is checked against its sha256 before its first row is used, as a
	// streamed layer's is before its first piece.
	err := r.s.ensureVerified(Embed, r.s.itemFor(Embed))
	var b []byte
	if err == nil {
		b, err = r.s.readRow(r.t, r.f, r.buf.buf, r.t.Offset+int64(id)*rb, rb)
	}
	if err == nil {
		var m quant.Matrix
		if m, err = r.ctor(1, r.t.Cols, b); err == nil {
			m.(quant.RowDecoder).DecodeRow(dst, 0)
			return
		}
	}
	r.s.fail(err)
	fillNaN(dst)
}
