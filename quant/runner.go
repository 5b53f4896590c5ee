package quant

import (
	"sync"

	"github.com/k3-project/k3/internal/kernels/parallel"
)

// Runner runs the row chunks of split calls on goroutines it keeps between
// calls (a model's worker pool), so the many small mat-vecs of a decode step
// do not each start and wake goroutines of their own.
type Runner interface {
	// Limit returns how many goroutines a call asking for workers gets.
	Limit(workers int) int
	// Run calls t.Run over contiguous ranges that tile [0, n), each of at
	// least grain rows, on up to Limit(workers) goroutines, and returns when
	// all of them have returned.
	Run(n, workers, grain int, t interface{ Run(lo, hi int) })
}

// MatVecOn is MatVecParallel(m, dst, x, workers) with the chunks run on r
// (nil r: exactly MatVecParallel). The chunks are MatVecParallel's and each
// output row is still computed whole by m's kernel, so the bits do not
// change. The caller has checked the shapes.
func MatVecOn(r Runner, m Matrix, dst, x []float32, workers int) {
	if r == nil {
		MatVecParallel(m, dst, x, workers)
		return
	}
	grain := rowGrain(m.Cols())
	if parallel.Chunks(m.Rows(), r.Limit(workers), grain) <= 1 {
		m.MatVec(dst, x) // inline, without the closure and the row view a split costs
		return
	}
	t := getTask(m, dst, x, 0, 0)
	r.Run(m.Rows(), workers, grain, t)
	putTask(t)
}

// MatMulOn is MatMulParallel(m, dst, stride, x, n, workers) with the chunks
// run on r (nil r: exactly MatMulParallel). The caller has checked the
// shapes.
func MatMulOn(r Runner, m Matrix, dst []float32, stride int, x []float32, n, workers int) {
	if r == nil {
		MatMulParallel(m, dst, stride, x, n, workers)
		return
	}
	grain := rowGrain(m.Cols() * n)
	if parallel.Chunks(m.Rows(), r.Limit(workers), grain) <= 1 {
		m.MatMul(dst, stride, x, n)
		return
	}
	t := getTask(m, dst, x, stride, n)
	r.Run(m.Rows(), workers, grain, t)
	putTask(t)
}

// rowTask is one split call. Tasks are recycled through a sync.Pool (like
// the kernels' scratch, it holds nothing a caller can observe): a closure
// capturing the arguments would be allocated on every call, and so would a
// view per chunk where the matrix is not a RowRanger.
type rowTask struct {
	m         Matrix
	dst, x    []float32
	stride, n int // n == 0: a mat-vec
}

var rowTasks = sync.Pool{New: func() any { return new(rowTask) }}

func getTask(m Matrix, dst, x []float32, stride, n int) *rowTask {
	t := rowTasks.Get().(*rowTask)
	*t = rowTask{m: m, dst: dst, x: x, stride: stride, n: n}
	return t
}

func putTask(t *rowTask) {
	*t = rowTask{}
	rowTasks.Put(t)
}

// Run computes output rows [lo, hi).
func (t *rowTask) Run(lo, hi int) {
	rr, ranged := t.m.(RowRanger)
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

// OnRunner returns m with its MatVecParallel and MatMulParallel calls run on
// r, or m itself when r or m is nil or m cannot decode rows (the wrapper
// must keep row access for the embedding and MLA's kv_b). Wrap once, at
// bind time: boxing a wrapper per call would allocate on every mat-vec. A
// split call on a RowRanger allocates nothing.
func OnRunner(m Matrix, r Runner) Matrix {
	if r == nil || m == nil {
		return m
	}
	if _, ok := m.(RowDecoder); !ok {
		return m
	}
	return onRunner{m, r}
}

// onRunner is a resident matrix whose split calls run on a Runner.
type onRunner struct {
	Matrix
	r Runner
}

var (
	_ Scheduler  = onRunner{}
	_ RowDecoder = onRunner{}
)

func (m onRunner) DecodeRow(dst []float32, r int) { m.Matrix.(RowDecoder).DecodeRow(dst, r) }

func (m onRunner) MatVecWorkers(dst, x []float32, workers int) {
	MatVecOn(m.r, m.Matrix, dst, x, workers)
}

func (m onRunner) MatMulWorkers(dst []float32, stride int, x []float32, n, workers int) {
	MatMulOn(m.r, m.Matrix, dst, stride, x, n, workers)
}
