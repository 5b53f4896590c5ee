package quant

import (
	"fmt"

	"github.com/k3-project/k3/internal/kernels/f64pool"
	"github.com/k3-project/k3/internal/kernels/floatbits"
	"github.com/k3-project/k3/internal/kernels/parallel"
)

// Matrix is a logical [Rows, Cols] row-major weight matrix kept in its packed
// encoding. Kernels read the packed bytes directly; no implementation ever
// materialises the whole matrix as floats.
//
// The methods take no error: shapes are validated once when the matrix is
// built, so a buffer of the wrong length passed to MatVec or MatMul is a
// programming error and panics with a message naming the lengths, rather than
// reading out of bounds or truncating silently.
type Matrix interface {
	// Format returns the encoding of the weights.
	Format() Format
	// Rows returns the number of output rows O.
	Rows() int
	// Cols returns the number of input columns I.
	Cols() int
	// MatVec sets dst[r] = row r · x with the format's canonical reduction;
	// len(dst)=Rows, len(x)=Cols.
	MatVec(dst, x []float32)
	// MatMul: x holds n rows of Cols floats; dst[t*stride + r] = row r · x[t];
	// bit-identical to MatVec.
	MatMul(dst []float32, stride int, x []float32, n int)
	// Slice returns rows [lo, hi) as a Matrix sharing storage (for
	// row-parallel work).
	Slice(lo, hi int) Matrix
}

// RowDecoder is implemented by every Matrix of this package. DecodeRow writes
// the values of row r into dst (len(dst) == Cols): the exact widened value for
// plain formats, dec(code)·scale rounded once to float32 for scaled formats.
// It is meant for bind-time extraction of a few rows and for tests; kernels
// never use it.
type RowDecoder interface {
	DecodeRow(dst []float32, r int)
}

// Scheduler is implemented by matrices that split their own rows across
// workers, such as a matrix whose rows arrive from storage in pieces (package
// trunk): MatVecParallel and MatMulParallel hand them the whole call. An
// implementation must compute each output row with the kernel its format's
// MatVec uses, so results stay bit-identical to a resident matrix.
type Scheduler interface {
	MatVecWorkers(dst, x []float32, workers int)
	MatMulWorkers(dst []float32, stride int, x []float32, n, workers int)
}

// RowRanger is implemented by matrices that multiply a range of their rows without building a
// view: Slice returns a new Matrix, which allocates, and a scheduler that splits every mat-vec of
// a decode step into chunks would otherwise allocate per chunk. The results are those of
// Slice(lo, hi).MatVec and Slice(lo, hi).MatMul, bit for bit.
type RowRanger interface {
	MatVecRows(dst, x []float32, lo, hi int)
	MatMulRows(dst []float32, stride int, x []float32, n, lo, hi int)
}

var _ RowRanger = (*plain)(nil)

// minRowGrain is a floor on the rows of a chunk, whatever the width.
const minRowGrain = 16

// rowGrain is the chunk size, in rows, for rows of work multiply-adds each:
// a chunk holds at least parallel.MinWork of them, so the small matrices of
// the fixture models (hidden 128) run inline. Chunking never changes a bit:
// each row is computed whole by one goroutine with the same kernel.
func rowGrain(work int) int {
	return max(minRowGrain, parallel.Grain(work))
}

// MatVecParallel computes m.MatVec(dst, x) with the rows split into
// contiguous ranges on up to workers goroutines (workers ≤ 1: inline). Each
// output row is computed by exactly one goroutine with the same kernel, so the
// result is bit-identical for every worker count.
func MatVecParallel(m Matrix, dst, x []float32, workers int) {
	rows := m.Rows()
	if len(dst) != rows || len(x) != m.Cols() {
		panic(fmt.Sprintf("quant.MatVecParallel: len(dst)=%d len(x)=%d, want %d and %d", len(dst), len(x), rows, m.Cols()))
	}
	if s, ok := m.(Scheduler); ok {
		s.MatVecWorkers(dst, x, workers)
		return
	}
	matVecChunks(m, dst, x, workers, rowGrain(m.Cols()))
}

// matVecChunks is MatVecParallel with chunks of at least grain rows (tests
// pass small grains to exercise the split on small matrices).
func matVecChunks(m Matrix, dst, x []float32, workers, grain int) {
	if workers <= 1 || parallel.Chunks(m.Rows(), workers, grain) <= 1 {
		m.MatVec(dst, x)
		return
	}
	parallel.For(m.Rows(), workers, grain, func(lo, hi int) {
		m.Slice(lo, hi).MatVec(dst[lo:hi], x)
	})
}

// MatMulParallel computes m.MatMul(dst, stride, x, n) with the rows split
// into contiguous ranges on up to workers goroutines (workers ≤ 1: inline).
func MatMulParallel(m Matrix, dst []float32, stride int, x []float32, n, workers int) {
	rows := m.Rows()
	checkMatMul(m.Format(), "MatMulParallel", rows, m.Cols(), len(dst), stride, len(x), n)
	if s, ok := m.(Scheduler); ok {
		s.MatMulWorkers(dst, stride, x, n, workers)
		return
	}
	matMulChunks(m, dst, stride, x, n, workers, rowGrain(m.Cols()*n))
}

// matMulChunks is MatMulParallel with chunks of at least grain rows.
func matMulChunks(m Matrix, dst []float32, stride int, x []float32, n, workers, grain int) {
	if workers <= 1 || parallel.Chunks(m.Rows(), workers, grain) <= 1 {
		m.MatMul(dst, stride, x, n)
		return
	}
	parallel.For(m.Rows(), workers, grain, func(lo, hi int) {
		m.Slice(lo, hi).MatMul(dst[lo:], stride, x, n)
	})
}

// checkMatVec and checkMatMul name the call as quant.<format>.<op>. They take
// the format and the operation apart, and join them only when they panic:
// they run on every mat-vec of a decode step, which must not allocate.
func checkMatVec(f Format, op string, rows, cols, ldst, lx int) {
	if ldst != rows || lx != cols {
		panic(fmt.Sprintf("quant.%s.%s: len(dst)=%d len(x)=%d, want Rows=%d and Cols=%d", f, op, ldst, lx, rows, cols))
	}
}

func checkMatMul(f Format, op string, rows, cols, ldst, stride, lx, n int) {
	if n < 0 || stride < rows || lx != n*cols {
		panic(fmt.Sprintf("quant.%s.%s: n=%d stride=%d len(x)=%d, want n ≥ 0, stride ≥ Rows=%d, len(x) = n·Cols = %d",
			f, op, n, stride, lx, rows, n*cols))
	}
	if n > 0 && rows > 0 {
		if need := (n-1)*stride + rows; ldst < need {
			panic(fmt.Sprintf("quant.%s.%s: len(dst)=%d < (n-1)·stride+Rows = %d", f, op, ldst, need))
		}
	}
}

func checkSlice(name string, rows, lo, hi int) {
	if lo < 0 || hi < lo || hi > rows {
		panic(fmt.Sprintf("quant.%s.Slice(%d, %d): out of range for %d rows", name, lo, hi, rows))
	}
}

func checkRow(name string, rows, cols, r, ldst int) {
	if r < 0 || r >= rows || ldst != cols {
		panic(fmt.Sprintf("quant.%s.DecodeRow: row %d of %d, len(dst)=%d want %d", name, r, rows, ldst, cols))
	}
}

// checkDims validates a logical shape and that rows·cols·mul fits an int.
func checkDims(rows, cols int) error {
	if rows < 0 || cols < 0 {
		return fmt.Errorf("%w: [%d, %d] has a negative dimension", ErrShape, rows, cols)
	}
	if cols > 0 && rows > (1<<50)/cols {
		return fmt.Errorf("%w: [%d, %d] is too large", ErrShape, rows, cols)
	}
	return nil
}

// checkLen compares a buffer length with the expected byte count.
func checkLen(what string, f Format, rows, cols int, got int, want int64, sentinel error) error {
	if int64(got) != want {
		return fmt.Errorf("%w: %s [%d, %d] %s is %d bytes, want %d", sentinel, f, rows, cols, what, got, want)
	}
	return nil
}

// rowMatMul is the shared MatMul for formats whose row kernel is a function
// of (row, activation): each output element is the same call MatVec makes, so
// bit-identity holds by construction. The weight row stays in cache while it
// meets all n activation rows.
func rowMatMul(rows, cols int, dst []float32, stride int, x []float32, n int, row func(r int, x []float64) float32) {
	if rows == 0 || n == 0 {
		return
	}
	sp := f64pool.Get(len(x))
	xw := floatbits.Widen64(*sp, x)
	for r := range rows {
		for t := range n {
			dst[t*stride+r] = row(r, xw[t*cols:(t+1)*cols:(t+1)*cols])
		}
	}
	f64pool.Put(sp)
}
