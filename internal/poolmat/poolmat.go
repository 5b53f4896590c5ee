// Package poolmat runs the row splits of quant mat-vecs and mat-muls on a parallel.Pool: the
// same chunks quant.MatVecParallel and MatMulParallel make, with each output row still computed
// whole by the matrix's own kernel, so the bits do not change; only the goroutines that run the
// chunks are the pool's awake helpers instead of ones started (and woken) per call.
//
// It must never import anything model-specific; the engine (package k3) and the trunk store use
// it.
package poolmat

import (
	"github.com/k3-project/k3/internal/parallel"
	"github.com/k3-project/k3/quant"
)

// minRows mirrors quant's floor on the rows of a chunk, so a split here has the grain of the
// same call through quant.
const minRows = 16

// MatVec is quant.MatVecParallel(m, dst, x, workers) with the chunks run on p (nil p: exactly
// quant.MatVecParallel). The caller has checked the shapes.
func MatVec(p *parallel.Pool, m quant.Matrix, dst, x []float32, workers int) {
	if p == nil {
		quant.MatVecParallel(m, dst, x, workers)
		return
	}
	grain := max(minRows, parallel.Grain(m.Cols()))
	if parallel.Chunks(m.Rows(), min(workers, p.Workers()), grain) <= 1 {
		m.MatVec(dst, x) // inline, without the closure and the row view a split costs
		return
	}
	p.For(m.Rows(), workers, grain, func(lo, hi int) {
		m.Slice(lo, hi).MatVec(dst[lo:hi], x)
	})
}

// MatMul is quant.MatMulParallel(m, dst, stride, x, n, workers) with the chunks run on p (nil
// p: exactly quant.MatMulParallel). The caller has checked the shapes.
func MatMul(p *parallel.Pool, m quant.Matrix, dst []float32, stride int, x []float32, n, workers int) {
	if p == nil {
		quant.MatMulParallel(m, dst, stride, x, n, workers)
		return
	}
	grain := max(minRows, parallel.Grain(m.Cols()*n))
	if parallel.Chunks(m.Rows(), min(workers, p.Workers()), grain) <= 1 {
		m.MatMul(dst, stride, x, n)
		return
	}
	p.For(m.Rows(), workers, grain, func(lo, hi int) {
		m.Slice(lo, hi).MatMul(dst[lo:], stride, x, n)
	})
}

// Matrix is a resident matrix whose quant.MatVecParallel and MatMulParallel calls run on Pool
// (it implements quant.Scheduler). Build it once, at bind time: boxing one per call would
// allocate on every mat-vec.
type Matrix struct {
	quant.Matrix
	Pool *parallel.Pool
}

var (
	_ quant.Scheduler  = Matrix{}
	_ quant.RowDecoder = Matrix{}
)

// Wrap returns m on p, or m itself when p is nil or m cannot decode rows (every plain matrix
// can; the wrapper must keep row access for the embedding and MLA's kv_b).
func Wrap(m quant.Matrix, p *parallel.Pool) quant.Matrix {
	if p == nil || m == nil {
		return m
	}
	if _, ok := m.(quant.RowDecoder); !ok {
		return m
	}
	return Matrix{m, p}
}

// DecodeRow implements quant.RowDecoder.
func (m Matrix) DecodeRow(dst []float32, r int) { m.Matrix.(quant.RowDecoder).DecodeRow(dst, r) }

// MatVecWorkers implements quant.Scheduler.
func (m Matrix) MatVecWorkers(dst, x []float32, workers int) {
	MatVec(m.Pool, m.Matrix, dst, x, workers)
}

// MatMulWorkers implements quant.Scheduler.
func (m Matrix) MatMulWorkers(dst []float32, stride int, x []float32, n, workers int) {
	MatMul(m.Pool, m.Matrix, dst, stride, x, n, workers)
}
