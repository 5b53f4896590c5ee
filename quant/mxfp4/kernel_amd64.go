//go:build amd64 && !purego

package mxfp4

import "golang.org/x/sys/cpu"

// haveAVX2FMA gates the assembly kernel (computed once from the CPU flags;
// x/sys/cpu also checks that the OS saves the YMM registers). The kernel
// uses AVX2, FMA and POPCNT.
var haveAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasPOPCNT

var avx2Kernel = kernel{widen: widenPermuted, align: GroupSize, rows: rowsAVX2, rows2: rows2AVX2}

// defaultKernel is the fastest assembly kernel the CPU supports.
var defaultKernel = pickKernel()

func pickKernel() kernel {
	switch {
	case haveAVX512:
		return avx512Kernel
	case haveAVX2FMA:
		return avx2Kernel
	}
	return genericKernel
}

// asmKernels returns the assembly kernels that can run here, by name, so
// that tests and benchmarks can force each one.
func asmKernels() map[string]kernel {
	ks := map[string]kernel{}
	if haveAVX2FMA {
		ks["avx2"] = avx2Kernel
	}
	if haveAVX512 {
		ks["avx512"] = avx512Kernel
	}
	return ks
}

// perm8 is the order in which the assembly consumes each run of eight
// columns. Its accumulators hold lanes [0 2 | 1 3] and [4 6 | 5 7] (the 128-bit
// halves hold even and odd columns, because VPSHUFB cannot cross them), so
// the activations are stored in that order once per call.
var perm8 = [8]int{0, 2, 1, 3, 4, 6, 5, 7}

// widenPermuted converts x to float64 in the order of perm8 within each run
// of eight columns. len(x) is a multiple of 32 here.
func widenPermuted(dst []float64, x []float32) []float64 {
	if cap(dst) < len(x) {
		dst = make([]float64, len(x))
	}
	dst = dst[:len(x)]
	for m := 0; m+8 <= len(x); m += 8 {
		d, v := dst[m:m+8:m+8], x[m:m+8:m+8]
		for i, p := range perm8 {
			d[i] = float64(v[p])
		}
	}
	return dst
}

// rowsAVX2asm multiplies rows rows of groups groups each; it returns the
// number of groups skipped for scale byte 255.
//
//go:noescape
func rowsAVX2asm(dst *float32, rows int, packed, scales *byte, xw *float64, groups int) int

func rowsAVX2(dst []float32, packed, scales []byte, xw []float64) int {
	groups := len(xw) / GroupSize
	switch {
	case len(dst) == 0:
		return 0
	case groups == 0:
		clear(dst)
		return 0
	}
	// Bounds the assembly relies on (guaranteed by the callers' Check).
	_ = packed[len(dst)*groups*16-1]
	_ = scales[len(dst)*groups-1]
	return rowsAVX2asm(&dst[0], len(dst), &packed[0], &scales[0], &xw[0], groups)
}

// rows2AVX2asm is rowsAVX2asm for two activation rows sharing each decoded
// weight, their outputs in dst0 and dst1; it counts skipped groups once.
//
//go:noescape
func rows2AVX2asm(dst0, dst1 *float32, rows int, packed, scales *byte, xw0, xw1 *float64, groups int) int

func rows2AVX2(dst0, dst1 []float32, packed, scales []byte, xw0, xw1 []float64) int {
	groups := len(xw0) / GroupSize
	switch {
	case len(dst0) == 0:
		return 0
	case groups == 0:
		clear(dst0)
		clear(dst1)
		return 0
	}
	// Bounds the assembly relies on (guaranteed by the callers' Check).
	_ = packed[len(dst0)*groups*16-1]
	_ = scales[len(dst0)*groups-1]
	_ = dst1[len(dst0)-1]
	_ = xw1[groups*GroupSize-1]
	return rows2AVX2asm(&dst0[0], &dst1[0], len(dst0), &packed[0], &scales[0], &xw0[0], &xw1[0], groups)
}
