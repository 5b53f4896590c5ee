package k3

import (
	"github.com/k3-project/k3/internal/parallel"
	"github.com/k3-project/k3/quant"
)

// pooledMatrix is a mapped dense matrix whose split mat-vecs and mat-muls run on the model's
// worker pool instead of goroutines started per call (see parallel.Pool for why). It splits
// rows exactly as quant.MatVecParallel does, and every row is still computed whole by the
// matrix's own kernel, so the bits are those of any other split.
type pooledMatrix struct {
	quant.Matrix
	pool *parallel.Pool
}

// minPooledRows mirrors quant's floor on the rows of a chunk.
const minPooledRows = 16

// DecodeRow forwards to the matrix, so the embedding and MLA's kv_b keep their row access.
func (m pooledMatrix) DecodeRow(dst []float32, r int) {
	m.Matrix.(quant.RowDecoder).DecodeRow(dst, r)
}

// MatVecWorkers implements quant.Scheduler.
func (m pooledMatrix) MatVecWorkers(dst, x []float32, workers int) {
	grain := max(minPooledRows, parallel.Grain(m.Cols()))
	m.pool.For(m.Rows(), workers, grain, func(lo, hi int) {
		m.Matrix.Slice(lo, hi).MatVec(dst[lo:hi], x)
	})
}

// MatMulWorkers implements quant.Scheduler.
func (m pooledMatrix) MatMulWorkers(dst []float32, stride int, x []float32, n, workers int) {
	grain := max(minPooledRows, parallel.Grain(m.Cols()*n))
	m.pool.For(m.Rows(), workers, grain, func(lo, hi int) {
		m.Matrix.Slice(lo, hi).MatMul(dst[lo:], stride, x, n)
	})
}

// pooled wraps a mapped matrix when the model has a pool.
func pooled(m quant.Matrix, p *parallel.Pool) quant.Matrix {
	if p == nil || m == nil {
		return m
	}
	if _, ok := m.(quant.RowDecoder); !ok {
		return m
	}
	return pooledMatrix{m, p}
}
