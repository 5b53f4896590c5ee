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
		m.matVecFused(dst, x, lo, hi)
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
			m.matVecFused(dst[t*stride:t*stride+rows], x[t*cols:(t+1)*cols], lo, hi)
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
// mat-vecs rather than by decoding the weights to bf16 once for all of them:
// decoding costs about one fused mat-vec and a bf16 mat-mul much less than a
// mat-vec per extra row (§6.11.5), so from three rows on the decode pays.
const fusedRowsMax = 2

// matVecFused computes rows [lo, hi) with a kernel that decodes in
// registers: the AVX-512 one where the CPU has it, else the AVX2 one.
func (m *Matrix) matVecFused(dst, x []float32, lo, hi int) {
	if m.wide {
		m.matVecWide(dst, x, lo, hi)
		return
	}
	m.matVecAVX2(dst, x, lo, hi)
}

// matVecWide runs the AVX-512 kernel over four rows a pass (then two, then
// one), so that a block's activations are loaded once for four rows and a
// call into the assembly covers four whole rows; escapes are decoded inside
// it. x is widened once per call, over the whole blocks, in the kernel's
// order (each sixteen as the even columns, then the odd ones, like the bf16
// kernel's) and scale (times 2^768, see dot512_amd64.s). The kernel hands
// back only a block whose window reaches exponent 255, which Go adds to the
// lanes in the kernel's scale. Rows of whole blocks the kernel finishes
// itself; otherwise Go scales the lanes back, exactly, and finishes the
// rows as it does the AVX2 kernel's.
func (m *Matrix) matVecWide(dst, x []float32, lo, hi int) {
	full := m.h.Cols / BlockSize
	pp := f64pool.Get(full * BlockSize)
	xp := *pp
	for c := 0; c < len(xp); c += 16 {
		d, s := xp[c:c+16:c+16], x[c:c+16:c+16]
		for j := range 8 {
			d[j], d[8+j] = float64(s[2*j])*wideScaleX, float64(s[2*j+1])*wideScaleX
		}
	}
	var acc [4][16]float64
	var ne [4]int
	var buf [2 * BlockSize]byte
	whole := full*BlockSize == m.h.Cols // the lanes hold every column of a row
	for r := lo; r < hi; {
		if whole && hi-r >= 4 {
			// Rows of whole blocks: one call for every pass of four.
			if p := passesWide(m.rows[r*m.rb:], m.h, xp, (hi-r)/4, dst[r-lo:]); p > 0 {
				r += 4 * p
				continue
			}
			// The pass at r hands a block back: it runs below.
		}
		nr := 4
		switch {
		case hi-r >= 4:
		case hi-r >= 2:
			nr = 2
		default:
			nr = 1
		}
		acc, ne = [4][16]float64{}, [4]int{}
		var out []float32
		if whole {
			out = dst[r-lo : r-lo+nr]
		}
		done := false // the kernel has stored the rows' results
		for k := 0; k < full; {
			t := dotRowsWide(m.rows[r*m.rb:], nr, m.h, xp, k, full-k, &acc, &ne, out)
			k += t
			done = t > 0 && k == full && whole
			if k < full {
				for i := range nr {
					ne[i] = m.addBlock(r+i, k, ne[i], &acc[i], &slotWide, x, wideScaleLanes, &buf)
				}
				k++
			}
		}
		for i := 0; i < nr && !done; i++ {
			a := &acc[i]
			for l := range a {
				a[l] *= 1 / wideScaleLanes
			}
			if whole {
				dst[r+i-lo] = float32(r16Tree(a, &slotWide))
				continue
			}
			dst[r+i-lo] = m.finishRow(r+i, full, ne[i], a, &slotWide, x, &buf)
		}
		r += nr
	}
	f64pool.Put(pp)
}

// The AVX-512 kernel's scales (dot512_amd64.s): it takes the activations
// times wideScaleX and builds each weight times 2^−896, so its lanes hold
// the sums times wideScaleLanes.
const (
	wideScaleX     = 0x1p768
	wideScaleLanes = 0x1p-128
)

// slotWide[l] is where the AVX-512 kernel keeps R16 lane l: the even lanes,
// then the odd ones.
var slotWide = [16]int{0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15}

// matVecAVX2 computes rows [lo, hi) with the AVX2 kernel: x is widened
// once, over the whole blocks, in the assembly's order (each run of eight
// as columns 0, 2, 4, 6, 1, 3, 5, 7); the assembly runs over each row's
// whole blocks and hands back the rare block with an escape, whose products
// Go adds to the same lanes before the assembly resumes.
func (m *Matrix) matVecAVX2(dst, x []float32, lo, hi int) {
	full := m.h.Cols / BlockSize * BlockSize
	pp := f64pool.Get(full)
	xp := (*pp)[:full]
	for c := 0; c < full; c += 8 {
		for j, k := range asmOrder {
			xp[c+j] = float64(x[c+k])
		}
	}
	var buf [2 * BlockSize]byte
	for r := lo; r < hi; r++ {
		dst[r-lo] = m.dotRow(r, x, xp, &buf)
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

// dotRow returns the R16 dot product (§5.2) of row r with x (xp: x widened
// in the AVX2 assembly's order over the whole blocks): the
// assembly adds the whole blocks without escapes, Go those with one, and
// finishRow the rest.
func (m *Matrix) dotRow(r int, x []float32, xp []float64, buf *[2 * BlockSize]byte) float32 {
	bases, sm, nib, _ := m.parts(r)
	full := m.h.Cols / BlockSize
	var a [16]float64 // in the assembly's slots
	ne := 0
	for k := 0; k < full; k++ {
		k += dotBlocks(sm[k*BlockSize:], nib[k*BlockSize/2:], bases[k:], xp[k*BlockSize:], full-k, &a)
		if k == full {
			break
		}
		ne = m.addBlock(r, k, ne, &a, &slotOf, x, 1, buf)
	}
	return m.finishRow(r, full, ne, &a, &slotOf, x, buf)
}

// addBlock adds to the lanes a (lane l in a[slots[l]]) the products of the
// whole block k of row r with x, times scale, a power of
// two that keeps every product exact; ne escape bytes of the row are used
// before the block, and it returns the count after it.
func (m *Matrix) addBlock(r, k, ne int, a *[16]float64, slots *[16]int, x []float32, scale float64, buf *[2 * BlockSize]byte) int {
	bases, sm, nib, esc := m.parts(r)
	lo := k * BlockSize
	ne = decodeSlow(buf[:], sm[lo:lo+BlockSize], nib, lo, esc, bases[k], ne)
	for i := range BlockSize {
		w := float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(buf[2*i:])) << 16))
		a[slots[i&15]] += w * float64(x[lo+i]) * scale
	}
	return ne
}

// finishRow returns the R16 dot product (§5.2) of row r with x given the lanes a (lane l in a[slots[l]]) over its first k blocks,
// which used ne escape bytes: it adds the other blocks' products of columns
// below 16·⌊Cols/16⌋ to the lanes in column order, combines the lanes with
// the tree and adds the tail in order.
func (m *Matrix) finishRow(r, k, ne int, a *[16]float64, slots *[16]int, x []float32, buf *[2 * BlockSize]byte) float32 {
	bases, sm, nib, esc := m.parts(r)
	cols := m.h.Cols
	mid := cols &^ 15
	var acc float64
	for ; k < len(bases); k++ {
		lo, hi := k*BlockSize, min((k+1)*BlockSize, cols)
		d := buf[:2*(hi-lo)]
		ne = decodeSlow(d, sm[lo:hi], nib, lo, esc, bases[k], ne)
		for i := lo; i < hi; i++ {
			w := float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*(i-lo):])) << 16))
			if i < mid {
				a[slots[i&15]] += w * float64(x[i])
				continue
			}
			if i == mid {
				acc = r16Tree(a, slots)
			}
			acc += w * float64(x[i])
		}
	}
	if mid == cols {
		acc = r16Tree(a, slots)
	}
	return float32(acc)
}

// r16Tree combines the sixteen lanes (lane l in a[slots[l]]) as §5.2 says.
func r16Tree(a *[16]float64, slots *[16]int) float64 {
	var c [4]float64
	for l := range 4 {
		c[l] = (a[slots[l]] + a[slots[l+4]]) + (a[slots[l+8]] + a[slots[l+12]])
	}
	return (c[0] + c[1]) + (c[2] + c[3])
}

// Level names the instruction set MatVec and MatMul decode with on this CPU:
// "avx512" (the four-row fused kernel), "avx2" (the one-row fused kernel) or
// "go" (the pure-Go twin). Results are the same bits at every level; what the
// level changes is the decode rate, and with it where the format pays
// (trunk.Lossless12Threads).
func Level() string {
	switch {
	case haveWide:
		return "avx512"
	case haveFused:
		return "avx2"
	}
	return "go"
}
