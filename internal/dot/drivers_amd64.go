//go:build amd64 && !purego

package dot

import "sync"

// widen writes the first len(dst) activations of x (a multiple of 16) to
// dst as float64 in the kernel's lane layout. Widening is exact.
func widen(f *asmFormat, dst []float64, x []float32) {
	x = x[:len(dst)]
	if !f.perm {
		for i, v := range x {
			dst[i] = float64(v)
		}
		return
	}
	for b := 0; b < len(dst); b += 16 {
		d := dst[b : b+16 : b+16]
		xs := x[b : b+16 : b+16]
		// Written out (rather than looping over xPermBF16) so the compiler
		// drops the bounds checks; TestWidenPermBF16 ties the two together.
		d[0], d[1], d[2], d[3] = float64(xs[0]), float64(xs[2]), float64(xs[4]), float64(xs[6])
		d[4], d[5], d[6], d[7] = float64(xs[1]), float64(xs[3]), float64(xs[5]), float64(xs[7])
		d[8], d[9], d[10], d[11] = float64(xs[8]), float64(xs[10]), float64(xs[12]), float64(xs[14])
		d[12], d[13], d[14], d[15] = float64(xs[9]), float64(xs[11]), float64(xs[13]), float64(xs[15])
	}
}

// scratchPool recycles the float64 activation buffers so a decode step does
// not allocate one per mat-vec. It holds no state a caller can observe.
var scratchPool = sync.Pool{New: func() any { return new([]float64) }}

func getScratch(n int) *[]float64 {
	p := scratchPool.Get().(*[]float64)
	if cap(*p) < n {
		*p = make([]float64, n)
	}
	*p = (*p)[:n]
	return p
}

// asmMatVec widens x once and streams the rows two at a time through the
// kernel, so each activation load serves two weight rows.
func asmMatVec(f *asmFormat, dst []float32, w []byte, x []float32) {
	cols := len(x)
	m := cols &^ 15
	if m == 0 {
		genericMatVec(f.dot, f.size, dst, w, x)
		return
	}
	sp := getScratch(m)
	s := *sp
	widen(f, s, x)
	rb := f.size * cols
	rows := len(dst)
	r := 0
	for ; r+1 < rows; r += 2 {
		w0 := w[r*rb : (r+1)*rb]
		w1 := w[(r+1)*rb : (r+2)*rb]
		a0, a1 := f.rows2(&w0[0], &w1[0], &s[0], m)
		dst[r] = float32(f.tail(a0, w0, x, m))
		dst[r+1] = float32(f.tail(a1, w1, x, m))
	}
	if r < rows {
		w0 := w[r*rb : (r+1)*rb]
		dst[r] = float32(f.tail(f.rows1(&w0[0], &s[0], m), w0, x, m))
	}
	scratchPool.Put(sp)
}

// matMulBlockBytes is the weight bytes processed per row block in asmMatMul:
// small enough that the block stays in L2 while every activation row passes
// over it, so each weight byte comes from memory once.
const matMulBlockBytes = 256 << 10

// asmMatMul widens all n activation rows once, then walks the weights in row
// blocks; within a block each weight row is converted once per pair of
// activation rows.
func asmMatMul(f *asmFormat, dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	m := cols &^ 15
	if m == 0 {
		genericMatMul(f.dot, f.size, dst, stride, w, x, n, rows, cols)
		return
	}
	sp := getScratch(n * m)
	s := *sp
	for t := range n {
		widen(f, s[t*m:(t+1)*m], x[t*cols:(t+1)*cols])
	}
	rb := f.size * cols
	block := max(1, matMulBlockBytes/rb)
	for r0 := 0; r0 < rows; r0 += block {
		r1 := min(rows, r0+block)
		t := 0
		for ; t+1 < n; t += 2 {
			xa := x[t*cols : (t+1)*cols]
			xb := x[(t+1)*cols : (t+2)*cols]
			sa, sb := &s[t*m], &s[(t+1)*m]
			for r := r0; r < r1; r++ {
				wr := w[r*rb : (r+1)*rb]
				a0, a1 := f.xs2(&wr[0], sa, sb, m)
				dst[t*stride+r] = float32(f.tail(a0, wr, xa, m))
				dst[(t+1)*stride+r] = float32(f.tail(a1, wr, xb, m))
			}
		}
		if t < n {
			xt := x[t*cols : (t+1)*cols]
			st := &s[t*m]
			r := r0
			for ; r+1 < r1; r += 2 {
				w0 := w[r*rb : (r+1)*rb]
				w1 := w[(r+1)*rb : (r+2)*rb]
				a0, a1 := f.rows2(&w0[0], &w1[0], st, m)
				dst[t*stride+r] = float32(f.tail(a0, w0, xt, m))
				dst[t*stride+r+1] = float32(f.tail(a1, w1, xt, m))
			}
			if r < r1 {
				wr := w[r*rb : (r+1)*rb]
				dst[t*stride+r] = float32(f.tail(f.rows1(&wr[0], st, m), wr, xt, m))
			}
		}
	}
	scratchPool.Put(sp)
}
