//go:build amd64 && !purego

package mxfp4

import (
	"bytes"

	"github.com/k3-project/k3/internal/scratch"
)

// The packed mat-mul, for many activation rows (routed experts in a
// prefill). The per-pass kernels decode every code again for each group of
// four activation rows, and spend as many µops on the decode and on the
// per-group tail (tree, scale, the sequential sum over the groups) as on
// the multiply-adds. gemmAVX512 decodes a block of weight rows once into a
// float64 panel (the E2M1 values, unscaled) and puts eight activation rows
// in the lanes of a vector instead of eight groups: column j of the eight
// is one 64-byte load, the weight is a broadcast, and each weight row's
// group tail (tree, scale multiply, add) is vertical over the eight rows.
//
// It keeps RG exactly: for every (weight row, activation row) pair, lane p
// of the accumulators computes what groupDot does (column j of a group in
// lane j mod 8, the first product multiplied, the rest fused-added in
// ascending j, the same tree), then multiplies the group sum by the scale
// and adds it to the row's float64 sum in group order, skipping scale 255;
// between column chunks the sums wait in memory unrounded.
//
// Layouts, in float64 units:
//   - panel: weight row i of the block at i·cols, column c at +c.
//   - xt: activation rows 8o..8o+7 (an octet) at 8·cols·o, column c at
//     +8c, row 8o+p in lane p.
//   - acc: octet o, weight row r at 8·(rows·o + r).

//go:noescape
func decodePanel(dst *float64, packed *byte, n int)

//go:noescape
func gemm3x8(acc *float64, w *float64, wstride int, x *float64, scales *byte, sstride, groups, triples int)

const (
	// gemmGroups is the groups per gemm3x8 pass: an octet's columns of them
	// (16 KiB) stay in L1 while every row triple of the block passes.
	gemmGroups = 8
	// gemmPanelBytes bounds the decoded panel so it stays in L2 while every
	// octet passes over it.
	gemmPanelBytes = 512 << 10
)

// gemmAVX512 is matMul for n ≥ gemmMinRows on the AVX-512 kernel. Rows past
// the last multiple of three and activation rows past the last multiple of
// eight go through the per-pass kernels.
func gemmAVX512(k kernel, dst []float32, stride int, packed, scales []byte, x []float32, n, rows, cols int) Stats {
	st := Stats{Groups: len(scales), NaNScaleGroups: bytes.Count(scales, []byte{NaNScale})}
	oct := n / 8
	rows3 := rows - rows%3
	ng := cols / GroupSize
	block := min(max(3, gemmPanelBytes/(8*cols)/3*3), rows3)
	if rows3 > 0 && oct > 0 {
		sp := scratch.Get(oct*8*cols + block*cols + oct*8*rows)
		buf := *sp
		xt, buf := buf[:oct*8*cols], buf[oct*8*cols:]
		panel, acc := buf[:block*cols], buf[block*cols:]
		for o := range oct {
			xo := xt[o*8*cols : (o+1)*8*cols]
			for p := range 8 {
				xp := x[(8*o+p)*cols : (8*o+p+1)*cols]
				for c, v := range xp {
					xo[8*c+p] = float64(v)
				}
			}
		}
		clear(acc)
		for r0 := 0; r0 < rows3; r0 += block {
			r1 := min(rows3, r0+block)
			decodePanel(&panel[0], &packed[r0*cols/2], (r1-r0)*cols/8)
			for g := 0; g < ng; g += gemmGroups {
				gc := min(gemmGroups, ng-g)
				for o := range oct {
					gemm3x8(&acc[8*(rows*o+r0)], &panel[g*GroupSize], 8*cols, &xt[8*(o*cols+g*GroupSize)],
						&scales[r0*ng+g], ng, gc, (r1-r0)/3)
				}
			}
		}
		for o := range oct {
			for p := range 8 {
				d := dst[(8*o+p)*stride : (8*o+p)*stride+rows3]
				a := acc[8*rows*o+p:]
				for r := range d {
					d[r] = float32(a[8*r])
				}
			}
		}
		scratch.Put(sp)
	}
	if rows3 < rows && oct > 0 {
		matMulPasses(k, dst[rows3:], stride, packed[rows3*cols/2:], scales[rows3*ng:], x[:8*oct*cols], 8*oct, rows-rows3, cols)
	}
	if 8*oct < n {
		matMulPasses(k, dst[8*oct*stride:], stride, packed, scales, x[8*oct*cols:], n-8*oct, rows, cols)
	}
	return st
}
