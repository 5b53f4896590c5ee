//go:build amd64 && !purego

package dot

import "sync"

// widen writes the first len(dst) activations of x (a multiple of 16) to
// dst as float64 in the kernel's lane layout. Widening is exact.
func widen(f *asmFormat, dst []float64, x []float32) {
	x = x[:len(dst)]
	switch f.layout {
	case layoutBF16x2:
		for b := 0; b < len(dst); b += 16 {
			d := dst[b : b+16 : b+16]
			xs := x[b : b+16 : b+16]
			// Written out (rather than looping over a permutation) so the
			// compiler drops the bounds checks; TestWidenPermBF16 pins it.
			d[0], d[1], d[2], d[3] = float64(xs[0]), float64(xs[2]), float64(xs[4]), float64(xs[6])
			d[4], d[5], d[6], d[7] = float64(xs[1]), float64(xs[3]), float64(xs[5]), float64(xs[7])
			d[8], d[9], d[10], d[11] = float64(xs[8]), float64(xs[10]), float64(xs[12]), float64(xs[14])
			d[12], d[13], d[14], d[15] = float64(xs[9]), float64(xs[11]), float64(xs[13]), float64(xs[15])
		}
	case layoutBF16x5:
		for b := 0; b < len(dst); b += 16 {
			d := dst[b : b+16 : b+16]
			xs := x[b : b+16 : b+16]
			d[0], d[1], d[2], d[3] = float64(xs[0]), float64(xs[2]), float64(xs[4]), float64(xs[6])
			d[4], d[5], d[6], d[7] = float64(xs[8]), float64(xs[10]), float64(xs[12]), float64(xs[14])
			d[8], d[9], d[10], d[11] = float64(xs[1]), float64(xs[3]), float64(xs[5]), float64(xs[7])
			d[12], d[13], d[14], d[15] = float64(xs[9]), float64(xs[11]), float64(xs[13]), float64(xs[15])
		}
	default:
		for i, v := range x {
			dst[i] = float64(v)
		}
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

// asmMatVec widens x once and streams the rows four (AVX-512) or two at a
// time through the kernel, so each activation load serves several weight
// rows.
func asmMatVec(f *asmFormat, dst []float32, w []byte, x []float32) {
	cols := len(x)
	m := cols &^ 15
	if m == 0 {
		genericMatVec(f.dot, f.size, dst, w, x)
		return
	}
	sp := getScratch(m + 4)
	s := (*sp)[:m]
	widen(f, s, x)
	matVecRows(f, dst, w, x, s, (*[4]float64)((*sp)[m:]), m, 0, len(dst))
	scratchPool.Put(sp)
}

// matVecRows sets dst[r] for r in [r0, r1) from the widened activation s
// (the first m of x). a receives the four-way kernels' results: it lives in
// the pooled scratch because a pointer passed through a func value escapes.
func matVecRows(f *asmFormat, dst []float32, w []byte, x []float32, s []float64, a *[4]float64, m, r0, r1 int) {
	rb := f.size * len(x)
	r := r0
	if f.rows4 != nil {
		pf := rowsPrefetch(rb)
		for ; r+3 < r1; r += 4 {
			w0 := w[r*rb : (r+1)*rb]
			w1 := w[(r+1)*rb : (r+2)*rb]
			w2 := w[(r+2)*rb : (r+3)*rb]
			w3 := w[(r+3)*rb : (r+4)*rb]
			f.rows4(&w0[0], &w1[0], &w2[0], &w3[0], &s[0], m, a, pf)
			dst[r] = float32(f.tail(a[0], w0, x, m))
			dst[r+1] = float32(f.tail(a[1], w1, x, m))
			dst[r+2] = float32(f.tail(a[2], w2, x, m))
			dst[r+3] = float32(f.tail(a[3], w3, x, m))
		}
	}
	for ; r+1 < r1; r += 2 {
		w0 := w[r*rb : (r+1)*rb]
		w1 := w[(r+1)*rb : (r+2)*rb]
		a0, a1 := f.rows2(&w0[0], &w1[0], &s[0], m)
		dst[r] = float32(f.tail(a0, w0, x, m))
		dst[r+1] = float32(f.tail(a1, w1, x, m))
	}
	if r < r1 {
		w0 := w[r*rb : (r+1)*rb]
		dst[r] = float32(f.tail(f.rows1(&w0[0], &s[0], m), w0, x, m))
	}
}

// rowsPrefetch is how far ahead of each of its four row pointers the four-row
// kernel prefetches, for rows of rb bytes. The rows of a block are adjacent,
// so a fixed 2 KiB lands, half way along a 4 KiB row, in the next row of the
// same block, which another pointer is already reading; the next block then
// starts cold, one page per row, where the hardware streamer does not
// follow. From 2 KiB rows on, the kernel prefetches the same offset in the
// next block (4·rb ahead): on 800 MB of 2048-column bf16 matrices that
// measured 11.3 → 14.8 GB/s on 4 KiB pages and 13.1 → 15.6 on huge pages,
// 1024 columns 10.6 → 12.4; narrower rows did better with the fixed
// distance (512 columns: 12.3 against 10.4).
func rowsPrefetch(rb int) int {
	if rb >= 2048 {
		return 4 * rb
	}
	return 2048
}

// matMulBlockBytes is the weight bytes processed per row block in asmMatMul:
// small enough that the block stays in L2 while every activation row passes
// over it, so each weight byte comes from memory once.
const matMulBlockBytes = 256 << 10

// asmMatMul widens all n activation rows once, then walks the weights in row
// blocks; within a block each weight row is converted once per group of four
// (AVX-512) or two activation rows.
func asmMatMul(f *asmFormat, dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	m := cols &^ 15
	if m == 0 {
		genericMatMul(f.dot, f.size, dst, stride, w, x, n, rows, cols)
		return
	}
	if f.panel != nil && (n >= gemmMinRowsPairs || f.r2xs4 == nil && n >= gemmMinRows) {
		gemmMatMul(f, dst, stride, w, x, n, rows, cols)
		return
	}
	rb := f.size * cols
	block := max(1, matMulBlockBytes/rb)
	var accLen int
	switch {
	case n < 2:
	case f.r3xs4 != nil:
		accLen = pairsPerRun(m) * 192
		// Whole triples, so that only the matrix's last rows fall to xs4.
		block = max(3, block/3*3)
	case f.r2xs4 != nil:
		accLen = pairsPerRun(m) * 128
	}
	// The heads of a kernel call (a; heads for matMulPairs) share the words
	// after the activations: out of the scratch, not on the stack, because
	// the kernels are called through func values and would take them to the
	// heap.
	sp := getScratch(n*m + 12 + accLen)
	s := (*sp)[:n*m]
	a := (*[4]float64)((*sp)[n*m:])
	heads := (*[12]float64)((*sp)[n*m:])
	acc := (*sp)[n*m+12:]
	for t := range n {
		widen(f, s[t*m:(t+1)*m], x[t*cols:(t+1)*cols])
	}
	for r0 := 0; r0 < rows; r0 += block {
		r1 := min(rows, r0+block)
		t := 0
		// Groups of four activation rows. With the two-row kernel (r2xs4,
		// AVX-512) a last group of three, or of two whose activations
		// overflow L1, runs as four, its last row repeated and the copies'
		// outputs dropped: that is cheaper than the two-activation form,
		// whose activations then come from L2 for every weight row (-bench
		// MatMulLevel n2 against n4 at 3584 columns). Two rows that fit L1 stay two: repeating
		// them doubles the multiply-adds (a two-session walk of the perf
		// checkpoint, 2048 columns, took 48 ms padded and 34 ms not). On
		// AVX2 (r3xs4) a last group of three runs as four too since r3xs4
		// prefetches its rows (-bench 'MatMulLevel/bf16/avx2/.*/n3$', three
		// runs alternating: 3.09 ms padded, 3.66–3.69 left to xs2 and a
		// mat-vec; before the prefetch, commit 0976c2b measured 7.4 GMAC/s
		// padded against 8.1); two stay two.
		for f.xs4 != nil && (t+3 < n || (f.r2xs4 != nil || f.r3xs4 != nil) && t+2 < n || f.r2xs4 != nil && t+1 < n && 16*m > pairsL1) {
			nx := min(4, n-t)
			var xs [4][]float64
			for j := range xs {
				u := t + min(j, nx-1)
				xs[j] = s[u*m : (u+1)*m]
			}
			r := r0
			if f.r2xs4 != nil || f.r3xs4 != nil {
				r = matMulPairs(f, dst, stride, w, x, acc, heads, &xs, t, nx, m, cols, r0, r1)
			}
			for ; r < r1; r++ {
				wr := w[r*rb : (r+1)*rb]
				f.xs4(&wr[0], &xs[0][0], &xs[1][0], &xs[2][0], &xs[3][0], m, a)
				for j := range nx {
					dst[(t+j)*stride+r] = float32(f.tail(a[j], wr, x[(t+j)*cols:(t+j+1)*cols], m))
				}
			}
			t += nx
		}
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
			matVecRows(f, dst[t*stride:], w, x[t*cols:(t+1)*cols], s[t*m:(t+1)*m], a, m, r0, r1)
		}
	}
	scratchPool.Put(sp)
}

// matMulColBlock is the columns per call of the two-row kernel in
// matMulPairs: the four activation rows' 4·512·8 = 16 KiB of a block stay in
// L1 while every weight pair of the row block passes over them, instead of
// 64–230 KiB of them coming from L2 for every pair, which held the kernel to
// about half the FMA peak (-bench MatMulLevel against -bench FMAPeak).
const matMulColBlock = 512

// pairsL1 is the most bytes of widened activations two rows may take and
// still be read from L1 by the two-activation form.
const pairsL1 = 32 << 10

// matMulPairsMax bounds the weight pairs matMulPairs carries through the
// column blocks at once (their partials take 1 KiB a pair), so the scratch
// stays small however narrow the matrix. Each activation block is fetched
// from L2 once per such run of pairs, so the bound is as large as a row
// block of 2048 columns: at 3072×3584 (18 pairs a block) capping at 16
// pairs cost 5% and at 4 pairs 20% (-bench MatMulLevel n4, n8).
const matMulPairsMax = 32

// pairsPerRun is how many weight pairs matMulPairs carries through the
// column blocks together for m columns: matMulPairsMax, or one when the
// columns are a single block and no partial has to wait, so that small
// matrices keep the 1 KiB of scratch they need.
func pairsPerRun(m int) int {
	if m > matMulColBlock {
		return matMulPairsMax
	}
	return 1
}

// matMulPairs sets, for the nx activation rows t.. (widened in xs, the last
// repeated up to four), the outputs of the weight rows of [r0, r1) two at a
// time (r2xs4), or three where the format has r3xs4, and returns the first
// row it did not do. It walks the columns in blocks of matMulColBlock,
// keeping each output's sixteen unreduced lane partials in acc between
// blocks: every lane still adds its columns in ascending order, so the heads
// are those of one pass. The reductions leave the output of weight row i and
// activation row j in heads[4i+j].
func matMulPairs(f *asmFormat, dst []float32, stride int, w []byte, x []float32, acc []float64, heads *[12]float64, xs *[4][]float64, t, nx, m, cols, r0, r1 int) int {
	rb := f.size * cols
	k := 2 // weight rows a call
	if f.r3xs4 != nil {
		k = 3
	}
	per := 64 * k // unreduced partials of one call's outputs
	end := r1 - (r1-r0)%k
	run := pairsPerRun(m)
	for ; r0 < end; r0 += k * run {
		calls := min(run, (end-r0)/k)
		clear(acc[:calls*per])
		for c := 0; c < m; c += matMulColBlock {
			cw := min(matMulColBlock, m-c)
			for p := range calls {
				r, o := r0+k*p, c*f.size
				x0, x1, x2, x3 := &xs[0][c], &xs[1][c], &xs[2][c], &xs[3][c]
				if k == 3 {
					f.r3xs4(&w[r*rb+o], &w[(r+1)*rb+o], &w[(r+2)*rb+o], x0, x1, x2, x3, cw, (*[192]float64)(acc[p*per:]), 3*rb)
				} else {
					f.r2xs4(&w[r*rb+o], &w[(r+1)*rb+o], x0, x1, x2, x3, cw, (*[128]float64)(acc[p*per:]))
				}
			}
		}
		for p := range calls {
			r := r0 + k*p
			if k == 3 {
				f.reduce12((*[192]float64)(acc[p*per:]), heads)
			} else {
				f.reduce8((*[128]float64)(acc[p*per:]), (*[8]float64)(heads[:8]))
			}
			for i := range k {
				wi := w[(r+i)*rb : (r+i+1)*rb]
				for j := range nx {
					xj := x[(t+j)*cols : (t+j+1)*cols]
					dst[(t+j)*stride+r+i] = float32(f.tail(heads[4*i+j], wi, xj, m))
				}
			}
		}
	}
	return end
}
