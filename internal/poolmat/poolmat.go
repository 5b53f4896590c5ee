// Package poolmat runs the row splits of quant mat-vecs and mat-muls on a parallel.Pool: the
// same chunks quant.MatVecParallel and MatMulParallel make, with each output row still computed
// whole by the matrix's own kernel, so the bits do not change; only the goroutines that run the
// chunks are the pool's awake helpers instead of ones started (and woken) per call.
//
// It must never import anything model-specific; the engine (package k3) and the trunk store use
// it.
package poolmat

import (
	"sync"

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
	if parallel.Chunks(m.Rows(), p.Limit(workers), grain) <= 1 {
		m.MatVec(dst, x) // inline, without the closure and the row view a split costs
		return
	}
	t := getTask(m, dst, x, 0, 0)
	p.Run(m.Rows(), workers, grain, t)
	putTask(t)
}

// MatMul is quant.MatMulParallel(m, dst, stride, x, n, workers) with the chunks run on p (nil
// p: exactly quant.MatMulParallel). The caller has checked the shapes.
func MatMul(p *parallel.Pool, m quant.Matrix, dst []float32, stride int, x []float32, n, workers int) {
	if p == nil {
		quant.MatMulParallel(m, dst, stride, x, n, workers)
		return
	}
	grain := max(minRows, parallel.Grain(m.Cols()*n))
	if parallel.Chunks(m.Rows(), p.Limit(workers), grain) <= 1 {
		m.MatMul(dst, stride, x, n)
		return
	}
	t := getTask(m, dst, x, stride, n)
	p.Run(m.Rows(), workers, grain, t)
	putTask(t)
}

// task is one split call. Tasks are recycled through a sync.Pool (like the kernels' scratch,
// it holds nothing a caller can observe): a closure capturing the arguments would be allocated
// on every call, and so would a view per chunk where the matrix is not a quant.RowRanger.
type task struct {
	m         quant.Matrix
	dst, x    []float32
	stride, n int // n == 0: a mat-vec
}

var tasks = sync.Pool{New: func() any { return new(task) }}

func getTask(m quant.Matrix, dst, x []float32, stride, n int) *task {
	t := tasks.Get().(*task)
	*t = task{m: m, dst: dst, x: x, stride: stride, n: n}
	return t
}

func putTask(t *task) {
	*t = task{}
	tasks.Put(t)
}

// Run implements parallel.Task.
func (t *task) Run(lo, hi int) {
	rr, ranged := t.m.(quant.RowRanger)
	switch {
	case t.n == 0 && ranged:
		rr.MatVecRows(t.dst[lo:hi], t.x, lo, hi)
	case t.n == 0:
		t.m.Slice(lo, hi).MatVec(t.dst[lo:hi], t.x)
	case ranged:
		rr.MatMulRows(t.dst[lo:], t.stride, t.x, t.n, lo, hi)
	default:
		t.m.Slice(lo, hi).MatMul(t.dst[lo:], t.stride, t.x, t.n)
	}
}

// Matrix is a resident matrix whose quant.MatVecParallel and MatMulParallel calls run on Pool
// (it implements quant.Scheduler). Build it once, at bind time: boxing one per call would
// allocate on every mat-vec. A split call on a quant.RowRanger allocates nothing.
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
