//go:build amd64 && !purego

package dot

// The packed mat-mul: for many activation rows the per-pass kernels
// (xs4, r2xs4) spend as many µops widening each weight vector as they
// spend multiplying it, because a widened weight serves at most four
// activation rows. gemmMatMul widens a group of weight rows once into a
// float64 panel and then runs every group of six activation rows over it,
// so the widening is paid once per n rows and the kernel is all loads and
// fused multiply-adds (4 weight and 6 activation vectors feed 24 FMAs).
//
// It keeps R16 exactly. An output's sixteen lanes are two vectors (halves)
// of eight, in the format's activation layout (natural for f32 and f16,
// evens then odds for bf16, the layout of every other AVX-512 kernel); a
// pass of gemm4x6 covers one half and a column chunk, and between chunks
// the accumulators wait in st as stored float64, unrounded. Each lane
// therefore still adds its elements' exact products in ascending column
// order from +0, one fused add each; the lanes are reduced with the tree of
// reduce16 (gemmStore*, gemmReduce*) and the tail added exactly as in the
// one-row path.
//
// Layouts, in float64 units, for m = cols &^ 15 and a column chunk of wk
// columns starting at k:
//   - panel: row block b (rows 4b..4b+3 of the group) starts at 4·m·b; in
//     it the chunk at 4k, its half h at +2·wk·h, and there block j
//     (columns k+16j..k+16j+15), row r at +32j + 8r.
//   - s: activation row t at m·t, the chunk at +k, its half h at +wk/2·h,
//     block j at +8j (widenHalves); zero rows up to a multiple of six.
//   - st: half h, row block b, position t, row r at 8·(24·(nb·h + b) + 4t + r).

//go:noescape
func gemm4x6(w *float64, wstride int, x *float64, xstride int, steps int, st *float64, blocks int, first bool, pf *float64, pflines int)

// fmaPeak runs n rounds of 16 independent register FMAs (the benchmark's
// ceiling for the kernels; it has no other use).
func fmaPeak(n int)

//go:noescape
func gemmReduceNat(out *float64, st *float64, count, hi int)

//go:noescape
func gemmReduceBF16(out *float64, st *float64, count, hi int)

//go:noescape
func gemmStoreNat(dst *float32, dstride int, st *float64, blocks, tcount, hi int)

//go:noescape
func gemmStoreBF16(dst *float32, dstride int, st *float64, blocks, tcount, hi int)

//go:noescape
func gemmStore8BF16(dst *float32, dstride int, st *float64, pairs, tcount, hi int)

//go:noescape
func widenHalvesNat(dst *float64, x *float32, m, hi int)

//go:noescape
func widenHalvesBF16(dst *float64, x *float32, m, hi int)

//go:noescape
func bf16Panel512(dst *float64, w *byte, m, hi int)

//go:noescape
func bf16Panel512x4(dst *float64, w *byte, rb int, m, hi int)

//go:noescape
func f32Panel512(dst *float64, w *byte, m, hi int)

//go:noescape
func f16Panel512(dst *float64, w *byte, m, hi int)

const (
	// gemmMinRows is the fewest activation rows for which gemmMatMul beats
	// the per-pass kernels (BenchmarkMatMulLevel).
	gemmMinRows = 32
	// gemmMinRowsPairs is gemmMinRows for a format with the column-blocked
	// two-row kernel (r2xs4). Alone, the blocked passes keep up with the
	// packed path longer (bf16 3072×3584, ms per call, passes against
	// packed: n32 7.6 / 10.2, n64 14.9 / 16.5, n256 59.2 / 60.9), but a
	// 256-token prefill of the perf checkpoint took 1.84 s through the
	// passes against 1.67 s packed (-bench Floor), so the switch stays at
	// gemmMinRows until a threshold is measured on whole prefills.
	gemmMinRowsPairs = gemmMinRows
	// gemmChunk is the columns per gemm4x6 pass: six activation rows' half
	// of a chunk (12 KiB) stay in L1 while every row block of the group
	// passes over them.
	gemmChunk = 512
	// gemmPanelBytes bounds the widened panel, so that it stays in L2 while
	// every group of six activation rows passes over it.
	gemmPanelBytes = 1 << 20
)

func gemmMatMul(f *asmFormat, dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	m := cols &^ 15
	np := (n + 5) / 6 * 6
	group := min(max(4, gemmPanelBytes/(8*m)&^3), (rows+3)&^3)
	nb := group / 4
	sp := getScratch(np*m + group*m + 2*nb*192 + nb*24)
	buf := *sp
	s, buf := buf[:np*m], buf[np*m:]
	panel, buf := buf[:group*m], buf[group*m:]
	st, out := buf[:2*nb*192], buf[2*nb*192:]
	for t := range n {
		widenHalves(f, s[t*m:(t+1)*m], x[t*cols:(t+1)*cols])
	}
	clear(s[n*m:])
	reduce, store := gemmReduceNat, gemmStoreNat
	var store8 func(dst *float32, dstride int, st *float64, pairs, tcount, hi int) // nil: four rows at a time only
	if f.layout == layoutBF16x5 {
		reduce, store, store8 = gemmReduceBF16, gemmStoreBF16, gemmStore8BF16
	}
	rb := f.size * cols
	for r0 := 0; r0 < rows; r0 += group {
		r1 := min(rows, r0+group)
		blocks := (r1 - r0 + 3) / 4
		if (r1-r0)%4 != 0 {
			clear(panel[(blocks-1)*4*m : blocks*4*m])
		}
		r := r0
		if f.panel4 != nil {
			for ; r+4 <= r1; r += 4 {
				p := panel[(r-r0)*m:]
				for k := 0; k < m; k += gemmChunk {
					wk := min(gemmChunk, m-k)
					f.panel4(&p[4*k], &w[r*rb+k*f.size], rb, wk, 16*wk)
				}
			}
		}
		for ; r < r1; r++ {
			i := r - r0
			p := panel[i/4*4*m+i%4*8:]
			for k := 0; k < m; k += gemmChunk {
				wk := min(gemmChunk, m-k)
				f.panel(&p[4*k], &w[r*rb+k*f.size], wk, 16*wk)
			}
		}
		for t0 := 0; t0 < n; t0 += 6 {
			for k := 0; k < m; k += gemmChunk {
				wk := min(gemmChunk, m-k)
				for h := range 2 {
					// The kernel prefetches the activations of the next
					// call (the next half, chunk or group of six rows),
					// which would otherwise come from L3 while it waits:
					// s outgrows L2 from about 64 rows.
					pn := t0*m + k + wk/2*(h+1)
					if h == 1 {
						pn = t0*m + k + wk
						if k+wk >= m {
							pn = (t0 + 6) * m
						}
					}
					if pn >= len(s)-5*m {
						pn = t0*m + k + wk/2*h
					}
					gemm4x6(&panel[4*k+2*wk*h], 32*m, &s[t0*m+k+wk/2*h], 8*m, wk/16, &st[h*nb*192], blocks, k == 0, &s[pn], (wk/16+blocks-1)/blocks)
				}
			}
			tn := min(6, n-t0)
			hi := 8 * 8 * 24 * nb
			done := 0 // rows stored by the vector path
			if m == cols {
				done = (r1 - r0) &^ 3
				b := 0 // blocks stored
				if store8 != nil && done >= 8 {
					b = done / 8 * 2
					store8(&dst[t0*stride+r0], 4*stride, &st[0], b/2, tn, hi)
				}
				if b < done/4 {
					store(&dst[t0*stride+r0+4*b], 4*stride, &st[192*b], done/4-b, tn, hi)
				}
			}
			if done == r1-r0 {
				continue
			}
			// The blocks from done/4 on (all of them with a tail): out holds
			// position t's heads at 24b'+4(t-t0)+r for row 4(done/4+b')+r.
			b0 := done / 4
			reduce(&out[0], &st[192*b0], 24*(blocks-b0), hi)
			for t := t0; t < t0+tn; t++ {
				o := out[4*(t-t0):]
				xt := x[t*cols : (t+1)*cols]
				for r := done; r < r1-r0; r++ {
					dst[t*stride+r0+r] = float32(f.tail(o[24*(r/4-b0)+r%4], w[(r0+r)*rb:(r0+r+1)*rb], xt, m))
				}
			}
		}
	}
	scratchPool.Put(sp)
}

// widenHalves widens the first len(dst) activations of x (a multiple of 16)
// into gemm4x6's order: per column chunk, the half-0 vectors of its blocks
// of sixteen in column order, then their half-1 vectors, each half as in the
// format's layout (see widen).
func widenHalves(f *asmFormat, dst []float64, x []float32) {
	m := len(dst)
	x = x[:m]
	for k := 0; k < m; k += gemmChunk {
		wk := min(gemmChunk, m-k)
		if f.layout == layoutBF16x5 {
			widenHalvesBF16(&dst[k], &x[k], wk, 4*wk)
		} else {
			widenHalvesNat(&dst[k], &x[k], wk, 4*wk)
		}
	}
}
