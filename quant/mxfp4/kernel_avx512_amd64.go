//go:build amd64 && !purego

package mxfp4

import "golang.org/x/sys/cpu"

// haveAVX512 gates the AVX-512 kernel (x/sys/cpu also checks that the OS
// saves the ZMM and mask registers). It uses AVX512F instructions and
// POPCNT; BW and VL are required as well, as on every CPU it was tuned and
// tested on (they come with AVX512F on all server cores since Skylake).
var haveAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasPOPCNT

var avx512Kernel = kernel{widen: widenBlocked, align: blockGroups * GroupSize, rows: rowsAVX512, rows2: rows2AVX512, rows4: rows4AVX512, gemm: gemmAVX512}

// blockGroups is the number of groups the AVX-512 kernel multiplies at once
// (one per float64 lane of a ZMM register).
const blockGroups = 8

// widenBlocked converts x to float64 transposed in blocks of eight groups:
// within block b, element j of group g (column 256b + 32g + j) is stored at
// 256b + 8j + g, so that one 64-byte load yields element j of eight groups.
// The last block is padded with +0 up to eight groups.
func widenBlocked(dst []float64, x []float32) []float64 {
	ng := len(x) / GroupSize
	n := (ng + blockGroups - 1) / blockGroups * blockGroups * GroupSize
	if cap(dst) < n {
		dst = make([]float64, n)
	}
	dst = dst[:n]
	clear(dst[len(x)/(blockGroups*GroupSize)*blockGroups*GroupSize:])
	for g := range ng {
		b := dst[g/blockGroups*blockGroups*GroupSize+g%blockGroups:]
		v := x[g*GroupSize : g*GroupSize+GroupSize : g*GroupSize+GroupSize]
		for j, f := range v {
			b[blockGroups*j] = float64(f)
		}
	}
	return dst
}

// rowsAVX512asm multiplies rows rows of groups groups each (xw laid out by
// widenBlocked); it returns the number of groups skipped for scale byte 255.
//
//go:noescape
func rowsAVX512asm(dst *float32, rows int, packed, scales *byte, xw *float64, groups int) int

func rowsAVX512(dst []float32, packed, scales []byte, xw []float64) int {
	if len(dst) == 0 {
		return 0
	}
	groups := len(scales) / len(dst)
	if groups == 0 {
		clear(dst)
		return 0
	}
	// Bounds the assembly relies on (guaranteed by the callers' Check).
	_ = packed[len(dst)*groups*16-1]
	_ = scales[len(dst)*groups-1]
	_ = xw[(groups+blockGroups-1)/blockGroups*blockGroups*GroupSize-1]
	return rowsAVX512asm(&dst[0], len(dst), &packed[0], &scales[0], &xw[0], groups)
}

// rows2AVX512asm is rowsAVX512asm for two activation rows sharing each
// decoded weight; it counts skipped groups once.
//
//go:noescape
func rows2AVX512asm(dst0, dst1 *float32, rows int, packed, scales *byte, xw0, xw1 *float64, groups int) int

func rows2AVX512(dst0, dst1 []float32, packed, scales []byte, xw0, xw1 []float64) int {
	if len(dst0) == 0 {
		return 0
	}
	groups := len(scales) / len(dst0)
	if groups == 0 {
		clear(dst0)
		clear(dst1)
		return 0
	}
	n := (groups + blockGroups - 1) / blockGroups * blockGroups * GroupSize
	_ = packed[len(dst0)*groups*16-1]
	_ = scales[len(dst0)*groups-1]
	_ = dst1[len(dst0)-1]
	_ = xw0[n-1]
	_ = xw1[n-1]
	return rows2AVX512asm(&dst0[0], &dst1[0], len(dst0), &packed[0], &scales[0], &xw0[0], &xw1[0], groups)
}

// rows4AVX512asm is rowsAVX512asm for four activation rows sharing each
// decoded weight, at xw + p·xstride, their outputs at dst + p·dstride; it
// counts skipped groups once.
//
//go:noescape
func rows4AVX512asm(dst *float32, dstride, rows int, packed, scales *byte, xw *float64, xstride, groups int) int

func rows4AVX512(dst []float32, dstride, rows int, packed, scales []byte, xw []float64, xstride int) int {
	if rows == 0 {
		return 0
	}
	groups := len(scales) / rows
	if groups == 0 {
		for p := range 4 {
			clear(dst[p*dstride : p*dstride+rows])
		}
		return 0
	}
	n := (groups + blockGroups - 1) / blockGroups * blockGroups * GroupSize
	// Bounds the assembly relies on.
	_ = packed[rows*groups*16-1]
	_ = scales[rows*groups-1]
	_ = dst[3*dstride+rows-1]
	_ = xw[3*xstride+n-1]
	return rows4AVX512asm(&dst[0], dstride, rows, &packed[0], &scales[0], &xw[0], xstride, groups)
}
