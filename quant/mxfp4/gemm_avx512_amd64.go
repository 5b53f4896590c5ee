//go:build amd64 && !purego

package mxfp4

import (
	"math"

	"github.com/k3-project/k3/internal/kernels/f64pool"
)

// The packed mat-mul, for several activation rows (routed experts in a
// prefill). The per-pass kernels decode every code again for each group of
// four (two, one) activation rows, and spend as many µops on the decode and
// on each group's tail (tree, scale, the sequential sum over the groups) as
// on the multiply-adds. gemmAVX512 decodes each code once, eight weight rows
// and gemmGroups groups at a time, into a float64 panel (the E2M1 values,
// unscaled) with one weight row per lane of a vector: column j of the eight
// rows is one 64-byte load, an activation is a broadcast, and each group's
// tail is vertical over the eight rows, the scale a vector multiply and
// scale 255 a NaN that masks the add. Six activation rows share each
// panel load (gemm8x6) and the last n mod 6 run three at a time (gemm8x3),
// so a matrix's activation rows need no padding beyond a multiple of three
// and an expert picked by a handful of positions runs here too.
//
// It keeps RG exactly: for every (weight row, activation row) pair, lane r
// computes what groupDot does (column j of a group in lane j mod 8, the
// first product multiplied, the rest fused-added in ascending j, the same
// tree), multiplies the group sum by the scale and adds it to the pair's
// float64 sum in group order, skipping scale 255, and rounds once.
//
// Layouts, in float64 units: the panel of a block of eight weight rows and
// gemmGroups groups has column c at 8c, row r in lane r; its scales have
// group g at 8g (NaN for scale byte 255); the activations are widened in
// their own order, row t at cols·t; the sums of activation rows t..t+2
// (t..t+5 for gemm8x6) wait between chunks at 8t.

//go:noescape
func decodeBlock(dst *float64, packed *byte, offs *[8]int64, n int)

//go:noescape
func widen64(dst *float64, x *float32, n int)

//go:noescape
func gemm8x6(dst *float32, dstride int, w *float64, x *float64, xstride int, sc *float64, st *float64, groups int, first, last bool)

//go:noescape
func gemm8x3(dst *float32, dstride int, w *float64, x0, x1, x2 *float64, sc *float64, st *float64, groups, np int, first, last bool)

// gemmGroups is the groups decoded at once: eight rows' columns of them
// (16 KiB of panel) stay in L1 while every activation row passes. Decoding
// a whole block of rows first spent more time storing the panel to L2 than
// the multiply-adds over it took for a few dozen activation rows.
const gemmGroups = 8

// gemmAVX512 is matMul for n ≥ gemmMinRows on the AVX-512 kernel. Weight
// rows past the last multiple of eight go through the per-pass kernels.
func gemmAVX512(k kernel, dst []float32, stride int, packed, scales []byte, x []float32, n, rows, cols int) Stats {
	st := ScanScales(scales)
	rows8 := rows &^ 7
	ng := cols / GroupSize
	if rows8 > 0 {
		trip := (n + 2) / 3
		sp := f64pool.Get(n*cols + 8*gemmGroups*GroupSize + 8*gemmGroups + 24*trip)
		buf := *sp
		xw, buf := buf[:n*cols], buf[n*cols:]
		panel, buf := buf[:8*gemmGroups*GroupSize], buf[8*gemmGroups*GroupSize:]
		sc, sums := buf[:8*gemmGroups], buf[8*gemmGroups:8*gemmGroups+24*trip]
		_ = x[n*cols-1]
		widen64(&xw[0], &x[0], n*cols) // cols is a multiple of GroupSize (32)
		var offs [8]int64
		for r := range offs {
			offs[r] = int64(r * cols / 2)
		}
		for r0 := 0; r0 < rows8; r0 += 8 {
			for g0 := 0; g0 < ng; g0 += gemmGroups {
				gc := min(gemmGroups, ng-g0)
				decodeBlock(&panel[0], &packed[r0*cols/2+g0*GroupSize/2], &offs, 2*gc)
				for g := range gc {
					for r := range 8 {
						s := scales[(r0+r)*ng+g0+g]
						sc[8*g+r] = scale64(s)
						if s == NaNScale {
							sc[8*g+r] = math.NaN()
						}
					}
				}
				c0 := g0 * GroupSize
				t := 0
				for ; t+6 <= n; t += 6 {
					gemm8x6(&dst[t*stride+r0], 4*stride, &panel[0], &xw[t*cols+c0], 8*cols, &sc[0], &sums[8*t], gc, g0 == 0, g0+gc == ng)
				}
				for ; t < n; t += 3 {
					x0 := &xw[t*cols+c0]
					x1, x2 := x0, x0
					if t+1 < n {
						x1 = &xw[(t+1)*cols+c0]
					}
					if t+2 < n {
						x2 = &xw[(t+2)*cols+c0]
					}
					gemm8x3(&dst[t*stride+r0], 4*stride, &panel[0], x0, x1, x2, &sc[0], &sums[8*t], gc, min(3, n-t), g0 == 0, g0+gc == ng)
				}
			}
		}
		f64pool.Put(sp)
	}
	if rows8 < rows {
		matMulPasses(k, dst[rows8:], stride, packed[rows8*cols/2:], scales[rows8*ng:], x, n, rows-rows8, cols)
	}
	return st
}
