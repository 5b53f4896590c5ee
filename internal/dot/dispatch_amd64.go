//go:build amd64 && !purego

package dot

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// useAVX2 selects the assembly kernels for F32 and BF16, useF16C those for
// F16 (VCVTPH2PS). Computed once from CPUID; never written afterwards.
var (
	useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	useF16C = useAVX2 && cpu.X86.HasF16C
)

func dotF32(w []byte, x []float32) float32 {
	if !useAVX2 || len(x) < 16 {
		return genericF32(w, x)
	}
	var d [1]float32
	asmMatVec(fmtF32, d[:], w, x)
	return d[0]
}

func dotBF16(w []byte, x []float32) float32 {
	if !useAVX2 || len(x) < 16 {
		return genericBF16(w, x)
	}
	var d [1]float32
	asmMatVec(fmtBF16, d[:], w, x)
	return d[0]
}

func dotF16(w []byte, x []float32) float32 {
	if !useF16C || len(x) < 16 {
		return genericF16(w, x)
	}
	var d [1]float32
	asmMatVec(fmtF16, d[:], w, x)
	return d[0]
}

// dotF32Float reuses the byte kernel: on amd64 a []float32 is its own
// little-endian encoding.
func dotF32Float(w, x []float32) float32 {
	if len(w) == 0 {
		return 0
	}
	return dotF32(unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w)), x)
}

func matVecF32(dst []float32, w []byte, x []float32) {
	if !useAVX2 {
		genericMatVec(genericF32, sizeF32, dst, w, x)
		return
	}
	asmMatVec(fmtF32, dst, w, x)
}

func matVecBF16(dst []float32, w []byte, x []float32) {
	if !useAVX2 {
		genericMatVec(genericBF16, sizeBF16, dst, w, x)
		return
	}
	asmMatVec(fmtBF16, dst, w, x)
}

func matVecF16(dst []float32, w []byte, x []float32) {
	if !useF16C {
		genericMatVec(genericF16, sizeF16, dst, w, x)
		return
	}
	asmMatVec(fmtF16, dst, w, x)
}

func matMulF32(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	if !useAVX2 {
		genericMatMul(genericF32, sizeF32, dst, stride, w, x, n, rows, cols)
		return
	}
	asmMatMul(fmtF32, dst, stride, w, x, n, rows, cols)
}

func matMulBF16(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	if !useAVX2 {
		genericMatMul(genericBF16, sizeBF16, dst, stride, w, x, n, rows, cols)
		return
	}
	asmMatMul(fmtBF16, dst, stride, w, x, n, rows, cols)
}

func matMulF16(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	if !useF16C {
		genericMatMul(genericF16, sizeF16, dst, stride, w, x, n, rows, cols)
		return
	}
	asmMatMul(fmtF16, dst, stride, w, x, n, rows, cols)
}
