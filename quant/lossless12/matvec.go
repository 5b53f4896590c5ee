package lossless12

import (
	"fmt"
	"sync"

	"github.com/k3-project/k3/internal/kernels/dot"
)

// chunkBytes bounds the bf16 scratch a kernel decodes into before handing
// the rows to the bf16 kernel: small enough to stay in L2, large enough that
// the per-call cost of the bf16 kernel (widening x to float64) is spread
// over many rows (18 of K3's 7168-wide rows; at 32 KiB, two rows a call,
// the widening cost as much as the dot products).
const chunkBytes = 256 << 10

// scratch recycles the decode buffers; it holds nothing a caller can
// observe.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

func (m *Matrix) chunkRows() int { return max(1, chunkBytes/max(1, 2*m.h.Cols)) }

func getScratch(n int) *[]byte {
	p := scratch.Get().(*[]byte)
	if cap(*p) < n {
		*p = make([]byte, n)
	}
	*p = (*p)[:n]
	return p
}

// MatVec sets dst[r] to the R16 dot product (§5.2) of row r with x;
// len(dst) = Rows, len(x) = Cols: bit-identical to dot.MatVecBF16 on the
// weights Encode was given. Each chunk of rows is decoded to its bf16 bytes
// and reduced by the bf16 kernel.
func (m *Matrix) MatVec(dst, x []float32) { m.MatVecRows(dst, x, 0, m.h.Rows) }

// MatVecRows is Slice(lo, hi).MatVec(dst, x) without building the view:
// len(dst) = hi − lo.
func (m *Matrix) MatVecRows(dst, x []float32, lo, hi int) {
	if lo < 0 || hi < lo || hi > m.h.Rows || len(dst) != hi-lo || len(x) != m.h.Cols {
		panic(fmt.Sprintf("lossless12.MatVec: rows [%d, %d) of %d, len(dst)=%d len(x)=%d, want %d and %d",
			lo, hi, m.h.Rows, len(dst), len(x), hi-lo, m.h.Cols))
	}
	if m.h.Cols == 0 {
		clear(dst)
		return
	}
	if lo == hi {
		return
	}
	m.eachChunk(lo, hi, func(buf []byte, r0, r1 int) { dot.MatVecBF16(dst[r0-lo:r1-lo], buf, x) })
}

// MatMul multiplies n activation rows packed in x (len(x) = n·Cols):
// dst[t·stride + r] = row r · x[t], bit-identical to MatVec for each t
// (and to dot.MatMulBF16 on the original weights). stride ≥ Rows.
func (m *Matrix) MatMul(dst []float32, stride int, x []float32, n int) {
	m.MatMulRows(dst, stride, x, n, 0, m.h.Rows)
}

// MatMulRows is Slice(lo, hi).MatMul(dst, stride, x, n) without building
// the view: dst[t·stride + r − lo] = row r · x[t] for r in [lo, hi).
func (m *Matrix) MatMulRows(dst []float32, stride int, x []float32, n, lo, hi int) {
	rows, cols := hi-lo, m.h.Cols
	if lo < 0 || hi < lo || hi > m.h.Rows || n < 0 || stride < rows || len(x) != n*cols ||
		(n > 0 && rows > 0 && len(dst) < (n-1)*stride+rows) {
		panic(fmt.Sprintf("lossless12.MatMul: rows [%d, %d) of %d, n=%d stride=%d len(x)=%d len(dst)=%d, cols %d",
			lo, hi, m.h.Rows, n, stride, len(x), len(dst), cols))
	}
	if rows == 0 || n == 0 {
		return
	}
	if cols == 0 {
		for t := range n {
			clear(dst[t*stride : t*stride+rows])
		}
		return
	}
	m.eachChunk(lo, hi, func(buf []byte, r0, _ int) { dot.MatMulBF16(dst[r0-lo:], stride, buf, x, n) })
}

// eachChunk decodes rows [lo, hi) a chunk at a time into one scratch buffer
// and hands each chunk to f with its row range [r0, r1).
func (m *Matrix) eachChunk(lo, hi int, f func(buf []byte, r0, r1 int)) {
	cr, rb := m.chunkRows(), 2*m.h.Cols
	p := getScratch(min(cr, hi-lo) * rb)
	for r0 := lo; r0 < hi; r0 += cr {
		r1 := min(r0+cr, hi)
		buf := (*p)[:(r1-r0)*rb]
		m.decodeRows(buf, r0, r1)
		f(buf, r0, r1)
	}
	scratch.Put(p)
}

// Level names the instruction set MatVec and MatMul decode with on this CPU:
// "avx512" or "avx2" (the assembly decoder, every whole block, escapes
// included, into bf16 for the bf16 kernels) or "go" (the pure-Go twin).
// Results are the same bits at every level; what the level changes is the
// decode rate, and with it where the format pays (trunk.Lossless12Threads).
func Level() string {
	switch {
	case haveWide:
		return "avx512"
	case haveAVX2:
		return "avx2"
	}
	return "go"
}
