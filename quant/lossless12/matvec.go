package lossless12

import (
	"fmt"
	"sync"

	"github.com/k3-project/k3/internal/kernels/dot"
)

// chunkBytes bounds the bf16 scratch a kernel decodes into before handing
// the rows to the bf16 kernel: small enough to stay in L1/L2 next to the
// activations, large enough that the per-call cost of the bf16 kernel
// (widening x) is spread over many rows.
const chunkBytes = 32 << 10

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
// len(dst) = Rows, len(x) = Cols. Each row is decoded to its bf16 bytes and
// reduced by the bf16 kernel, so the result is bit-identical to
// dot.MatVecBF16 on the weights Encode was given.
func (m *Matrix) MatVec(dst, x []float32) {
	if len(dst) != m.h.Rows || len(x) != m.h.Cols {
		panic(fmt.Sprintf("lossless12.MatVec: len(dst)=%d len(x)=%d, want %d and %d", len(dst), len(x), m.h.Rows, m.h.Cols))
	}
	if m.h.Cols == 0 {
		clear(dst)
		return
	}
	cr, rb := m.chunkRows(), 2*m.h.Cols
	p := getScratch(min(cr, m.h.Rows) * rb)
	for r0 := 0; r0 < m.h.Rows; r0 += cr {
		r1 := min(r0+cr, m.h.Rows)
		buf := (*p)[:(r1-r0)*rb]
		for r := r0; r < r1; r++ {
			m.decodeRow(buf[(r-r0)*rb:(r-r0+1)*rb], r)
		}
		dot.MatVecBF16(dst[r0:r1], buf, x)
	}
	scratch.Put(p)
}

// MatMul multiplies n activation rows packed in x (len(x) = n·Cols):
// dst[t·stride + r] = row r · x[t], bit-identical to MatVec for each t
// (and to dot.MatMulBF16 on the original weights). stride ≥ Rows.
func (m *Matrix) MatMul(dst []float32, stride int, x []float32, n int) {
	rows, cols := m.h.Rows, m.h.Cols
	if n < 0 || stride < rows || len(x) != n*cols || (n > 0 && rows > 0 && len(dst) < (n-1)*stride+rows) {
		panic(fmt.Sprintf("lossless12.MatMul: n=%d stride=%d len(x)=%d len(dst)=%d for [%d, %d]", n, stride, len(x), len(dst), rows, cols))
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
	cr, rb := m.chunkRows(), 2*cols
	p := getScratch(min(cr, rows) * rb)
	for r0 := 0; r0 < rows; r0 += cr {
		r1 := min(r0+cr, rows)
		buf := (*p)[:(r1-r0)*rb]
		for r := r0; r < r1; r++ {
			m.decodeRow(buf[(r-r0)*rb:(r-r0+1)*rb], r)
		}
		dot.MatMulBF16(dst[r0:], stride, buf, x, n)
	}
	scratch.Put(p)
}
