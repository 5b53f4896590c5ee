package mxfp4

import (
	"fmt"

	"github.com/k3-project/k3/internal/kernels/f64pool"
)

// MatVec sets dst[r] to row r of the matrix times x with the RG reduction,
// for a matrix of len(dst) rows and len(x) columns. The geometry is a
// precondition, validated once at bind time with Check (quant does so when
// it wraps the arrays); MatVec panics with a descriptive error when it does
// not hold, as it would for an out-of-range index. MatVecStats reports the
// same condition as an error instead.
func MatVec(dst []float32, packed, scales []byte, x []float32) {
	if _, err := MatVecStats(dst, packed, scales, x); err != nil {
		panic(err)
	}
}

// MatVecStats is MatVec returning an error for inconsistent lengths and the
// statistics of the groups it read.
func MatVecStats(dst []float32, packed, scales []byte, x []float32) (Stats, error) {
	rows, cols := len(dst), len(x)
	if err := Check(rows, cols, len(packed), len(scales)); err != nil {
		return Stats{}, fmt.Errorf("matvec: %w", err)
	}
	k := defaultKernel
	p := f64pool.Get(k.width(cols))
	st := matVec(k, dst, packed, scales, k.widen(*p, x))
	f64pool.Put(p)
	return st, nil
}

// MatMul multiplies n activation rows (x holds n·cols floats, row t at
// x[t·cols:]) by the [rows, cols] matrix: dst[t·stride + r] = row r · x_t,
// each element bit-identical to MatVec. stride >= rows, and dst must hold
// (n−1)·stride + rows elements; the elements between rows are untouched.
func MatMul(dst []float32, stride int, packed, scales []byte, x []float32, n, rows, cols int) (Stats, error) {
	if err := Check(rows, cols, len(packed), len(scales)); err != nil {
		return Stats{}, fmt.Errorf("matmul: %w", err)
	}
	if err := checkBatch(len(dst), stride, len(x), n, rows, cols); err != nil {
		return Stats{}, fmt.Errorf("matmul: %w", err)
	}
	return matMul(defaultKernel, dst, stride, packed, scales, x, n, rows, cols), nil
}

func checkBatch(dstLen, stride, xLen, n, rows, cols int) error {
	if n < 0 || stride < rows {
		return fmt.Errorf("%w: n = %d, stride = %d for %d rows", ErrShape, n, stride, rows)
	}
	if n == 0 {
		if xLen != 0 {
			return fmt.Errorf("%w: n = 0 with %d activations", ErrShape, xLen)
		}
		return nil
	}
	if cols > 0 && n > xLen/cols || xLen != n*cols {
		return fmt.Errorf("%w: x has %d floats, want n·cols = %d·%d", ErrShape, xLen, n, cols)
	}
	if stride > 0 && n-1 > (dstLen-rows)/stride || dstLen < rows {
		return fmt.Errorf("%w: dst has %d floats, want at least (n−1)·stride + rows = (%d−1)·%d + %d", ErrShape, dstLen, n, stride, rows)
	}
	return nil
}

// kernel is one implementation of the RG mat-vec: widen prepares x in the
// layout rows expects (k.width(len(x)) floats: the columns padded to a
// multiple of align), rows multiplies len(dst) rows and returns the number
// of groups skipped for scale 255. rows2, when not nil, does the same for
// two activation rows at once (sharing the weight decoding) and must give
// what two rows calls give.
type kernel struct {
	widen func(dst []float64, x []float32) []float64
	align int
	rows  func(dst []float32, packed, scales []byte, xw []float64) int
	rows2 func(dst0, dst1 []float32, packed, scales []byte, xw0, xw1 []float64) int
	// rows4, when not nil, does the same for four activation rows at xw +
	// p·xstride, their outputs rows long at dst + p·dstride.
	rows4 func(dst []float32, dstride, rows int, packed, scales []byte, xw []float64, xstride int) int
	// gemm, when not nil, is matMul for at least gemmMinRows activation
	// rows.
	gemm func(k kernel, dst []float32, stride int, packed, scales []byte, x []float32, n, rows, cols int) Stats
}

// width is the length of the widened form of cols activations. The callers
// take buffers of that length from internal/kernels/f64pool, so that widen reuses
// them instead of allocating on every call.
func (k kernel) width(cols int) int {
	if k.align <= 1 {
		return cols
	}
	return (cols + k.align - 1) / k.align * k.align
}

func matVec(k kernel, dst []float32, packed, scales []byte, xw []float64) Stats {
	nan := k.rows(dst, packed, scales, xw)
	return Stats{Groups: len(scales), NaNScaleGroups: nan}
}

// rows4Bytes bounds the widened activations of four rows for the
// four-row kernel: every weight row reads all of them again, and while they
// stay in L1 decoding each weight once for four rows pays (a 512×1024 or
// 1024×512 matrix over 32 rows, the perf geometry's experts, takes 11–14%
// less time than with the two-row kernel: BenchmarkMatMul's kernel=avx512
// against avx512-2row), but from L2 it loses (11–16% more at 2048 and 3584
// columns, measured with this bound removed).
const rows4Bytes = 32 << 10

// gemmMinRows is the fewest activation rows for which matMul uses a
// kernel's packed form: with four, its second pass of three carries one
// (BenchmarkMatMul).
const gemmMinRows = 5

// blockBytes bounds the packed bytes of the rows that MatMul multiplies by
// every activation row before moving on, so they stay in L2.
const blockBytes = 128 << 10

func matMul(k kernel, dst []float32, stride int, packed, scales []byte, x []float32, n, rows, cols int) Stats {
	if k.gemm != nil && n >= gemmMinRows && cols > 0 && rows > 0 {
		return k.gemm(k, dst, stride, packed, scales, x, n, rows, cols)
	}
	return matMulPasses(k, dst, stride, packed, scales, x, n, rows, cols)
}

// matMulPasses is matMul with the per-pass kernels: each block of weight
// rows is decoded again for every four (two, one) activation rows.
func matMulPasses(k kernel, dst []float32, stride int, packed, scales []byte, x []float32, n, rows, cols int) Stats {
	st := Stats{Groups: len(scales)}
	if n == 0 || rows == 0 {
		return st
	}
	if cols == 0 {
		for t := range n {
			clear(dst[t*stride : t*stride+rows])
		}
		return st
	}
	w := k.width(cols)
	sp := f64pool.Get(n * w)
	defer f64pool.Put(sp)
	buf := *sp
	for t := range n {
		k.widen(buf[t*w:(t+1)*w:(t+1)*w], x[t*cols:(t+1)*cols])
	}
	xw := func(t int) []float64 { return buf[t*w : (t+1)*w : (t+1)*w] }
	pb, sb := cols/2, cols/GroupSize
	block := max(1, blockBytes/pb)
	for lo := 0; lo < rows; lo += block {
		hi := min(rows, lo+block)
		p, s := packed[lo*pb:hi*pb], scales[lo*sb:hi*sb]
		t := 0
		if k.rows4 != nil && 4*w*8 <= rows4Bytes {
			for ; t+4 <= n; t += 4 {
				nan := k.rows4(dst[t*stride+lo:], stride, hi-lo, p, s, buf[t*w:], w)
				if t == 0 {
					st.NaNScaleGroups += nan
				}
			}
		}
		if k.rows2 != nil {
			for ; t+2 <= n; t += 2 {
				nan := k.rows2(dst[t*stride+lo:t*stride+hi], dst[(t+1)*stride+lo:(t+1)*stride+hi], p, s, xw(t), xw(t+1))
				if t == 0 {
					st.NaNScaleGroups += nan
				}
			}
		}
		for ; t < n; t++ {
			nan := k.rows(dst[t*stride+lo:t*stride+hi], p, s, xw(t))
			if t == 0 {
				st.NaNScaleGroups += nan
			}
		}
	}
	return st
}
