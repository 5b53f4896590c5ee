package lossless12

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/k3-project/k3/internal/kernels/dot"
	"github.com/k3-project/k3/internal/kernels/f64pool"
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
// weights Encode was given. With AVX2 and FMA the weights are decoded in
// registers; otherwise each chunk of rows is decoded to its bf16 bytes and
// reduced by the bf16 kernel.
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
	if m.fused {
		m.matVecAVX2(dst, x, lo, hi)
		return
	}
	cr, rb := m.chunkRows(), 2*m.h.Cols
	p := getScratch(min(cr, hi-lo) * rb)
	for r0 := lo; r0 < hi; r0 += cr {
		r1 := min(r0+cr, hi)
		buf := (*p)[:(r1-r0)*rb]
		m.decodeRows(buf, r0, r1)
		dot.MatVecBF16(dst[r0-lo:r1-lo], buf, x)
	}
	scratch.Put(p)
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
	if m.fused && n <= fusedRowsMax {
		for t := range n {
			m.matVecAVX2(dst[t*stride:t*stride+rows], x[t*cols:(t+1)*cols], lo, hi)
		}
		return
	}
	cr, rb := m.chunkRows(), 2*cols
	p := getScratch(min(cr, rows) * rb)
	for r0 := lo; r0 < hi; r0 += cr {
		r1 := min(r0+cr, hi)
		buf := (*p)[:(r1-r0)*rb]
		m.decodeRows(buf, r0, r1)
		dot.MatMulBF16(dst[r0-lo:], stride, buf, x, n)
	}
	scratch.Put(p)
}

// fusedRowsMax is the most activation rows MatMul runs as that many fused
// mat-vecs; from one more it decodes each chunk once for all of them.
const fusedRowsMax = 2

// matVecAVX2 computes rows [lo, hi) with the fused AVX2 kernel: x is
// widened once, over the whole blocks, in the assembly's order (each run of
// eight as columns 0, 2, 4, 6, 1, 3, 5, 7); the assembly adds every whole
// block of a row, escapes included, and finishRow the rest.
func (m *Matrix) matVecAVX2(dst, x []float32, lo, hi int) {
	full := m.h.Cols / BlockSize
	pp := f64pool.Get(full * BlockSize)
	xp := (*pp)[:full*BlockSize]
	for c := 0; c < len(xp); c += 8 {
		for j, k := range asmOrder {
			xp[c+j] = float64(x[c+k])
		}
	}
	var buf [2 * BlockSize]byte
	for r := lo; r < hi; r++ {
		bases, sm, idx, esc := m.parts(r)
		var a [16]float64 // in the assembly's slots
		ne := 0
		if full > 0 {
			ne = dotWhole(sm, idx, bases, esc, xp, full, &a)
		}
		dst[r-lo] = m.finishRow(r, full, ne, &a, x, &buf)
	}
	f64pool.Put(pp)
}

// asmOrder is the order in which the AVX2 assembly takes each run of eight
// columns (the even ones, then the odd ones).
var asmOrder = [8]int{0, 2, 4, 6, 1, 3, 5, 7}

// slotOf[l] is where the AVX2 assembly keeps R16 lane l in its
// accumulators (lanes 0, 2, 4, 6 | 1, 3, 5, 7 | 8, 10, 12, 14 | 9, 11, 13,
// 15).
var slotOf = [16]int{0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15}

// finishRow returns the R16 dot product (§5.2) of row r with x given the
// lanes a (lane l in a[slotOf[l]]) over its first k blocks, which used ne
// escape bytes: it adds the other blocks' products of columns below
// 16·⌊Cols/16⌋ to the lanes in column order, combines the lanes with the
// tree and adds the tail in order.
func (m *Matrix) finishRow(r, k, ne int, a *[16]float64, x []float32, buf *[2 * BlockSize]byte) float32 {
	bases, sm, idx, esc := m.parts(r)
	cols := m.h.Cols
	mid := cols &^ 15
	var acc float64
	for ; k < len(bases); k++ {
		lo, hi := k*BlockSize, min((k+1)*BlockSize, cols)
		d := buf[:2*(hi-lo)]
		pl, w := blockPlanes(idx, k, hi-lo)
		ne = decodeBlock(d, sm[lo:hi], pl, w, esc, bases[k], ne)
		for i := lo; i < hi; i++ {
			wt := float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*(i-lo):])) << 16))
			if i < mid {
				a[slotOf[i&15]] += wt * float64(x[i])
				continue
			}
			if i == mid {
				acc = r16Tree(a)
			}
			acc += wt * float64(x[i])
		}
	}
	if mid == cols {
		acc = r16Tree(a)
	}
	return float32(acc)
}

// r16Tree combines the sixteen lanes (lane l in a[slotOf[l]]) as §5.2 says.
func r16Tree(a *[16]float64) float64 {
	var c [4]float64
	for l := range 4 {
		c[l] = (a[slotOf[l]] + a[slotOf[l+4]]) + (a[slotOf[l+8]] + a[slotOf[l+12]])
	}
	return (c[0] + c[1]) + (c[2] + c[3])
}

// Level names the instruction set MatVec and MatMul decode with on this CPU:
// "avx2" (the fused one-row kernel, with AVX2 and FMA) or "go" (the pure-Go
// twin). Results are the same bits at every level; what the level changes
// is the decode rate, and with it where the format pays
// (trunk.Lossless12Threads). The layout of three-bit indices has no AVX-512
// kernel yet (issue 27): such a CPU runs the AVX2 one.
func Level() string {
	if haveFused {
		return "avx2"
	}
	return "go"
}
