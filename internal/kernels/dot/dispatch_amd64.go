//go:build amd64 && !purego

package dot

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The kernel set for each format on this CPU, chosen once from CPUID and
// never written afterwards; nil means the pure-Go twin. AVX-512 (F, BW, DQ,
// VL) kernels are preferred, then AVX2+FMA (F16 also needs F16C). All
// levels give identical bits; the tests run every level the CPU has.
var (
	useAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	useF16C   = useAVX2 && cpu.X86.HasF16C
	useAVX512 = useAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
		cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL

	kernF32  = pick(useAVX512, fmtF32x512, useAVX2, fmtF32)
	kernBF16 = pick(useAVX512, fmtBF16x512, useAVX2, fmtBF16)
	kernF16  = pick(useAVX512 && useF16C, fmtF16x512, useF16C, fmtF16)
)

func pick(ok512 bool, f512 *asmFormat, ok2 bool, f2 *asmFormat) *asmFormat {
	switch {
	case ok512:
		return f512
	case ok2:
		return f2
	}
	return nil
}

func dotF32(w []byte, x []float32) float32 {
	if kernF32 == nil || len(x) < 16 {
		return genericF32(w, x)
	}
	var d [1]float32
	asmMatVec(kernF32, d[:], w, x)
	return d[0]
}

func dotBF16(w []byte, x []float32) float32 {
	if kernBF16 == nil || len(x) < 16 {
		return genericBF16(w, x)
	}
	var d [1]float32
	asmMatVec(kernBF16, d[:], w, x)
	return d[0]
}

func dotF16(w []byte, x []float32) float32 {
	if kernF16 == nil || len(x) < 16 {
		return genericF16(w, x)
	}
	var d [1]float32
	asmMatVec(kernF16, d[:], w, x)
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
	if kernF32 == nil {
		genericMatVec(genericF32, sizeF32, dst, w, x)
		return
	}
	asmMatVec(kernF32, dst, w, x)
}

func matMulF32(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	if kernF32 == nil {
		genericMatMul(genericF32, sizeF32, dst, stride, w, x, n, rows, cols)
		return
	}
	asmMatMul(kernF32, dst, stride, w, x, n, rows, cols)
}

func matVecBF16(dst []float32, w []byte, x []float32) {
	if kernBF16 == nil {
		genericMatVec(genericBF16, sizeBF16, dst, w, x)
		return
	}
	asmMatVec(kernBF16, dst, w, x)
}

func matMulBF16(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	if kernBF16 == nil {
		genericMatMul(genericBF16, sizeBF16, dst, stride, w, x, n, rows, cols)
		return
	}
	asmMatMul(kernBF16, dst, stride, w, x, n, rows, cols)
}

func matVecF16(dst []float32, w []byte, x []float32) {
	if kernF16 == nil {
		genericMatVec(genericF16, sizeF16, dst, w, x)
		return
	}
	asmMatVec(kernF16, dst, w, x)
}

func matMulF16(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	if kernF16 == nil {
		genericMatMul(genericF16, sizeF16, dst, stride, w, x, n, rows, cols)
		return
	}
	asmMatMul(kernF16, dst, stride, w, x, n, rows, cols)
}
