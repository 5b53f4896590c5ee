//go:build !purego

#include "textflag.h"

// acc[i] += a·f64(x[i]) for the first n elements (n a multiple of 4), four
// float64 lanes per ymm. Products of two float32 values are exact in
// float64, so VFMADD231PD rounds exactly like a multiply then an add.

// func axpy1AVX2(acc *float64, x *float32, a float64, n int)
TEXT ·axpy1AVX2(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSD a+16(FP), Y4
	MOVQ n+24(FP), CX
	XORQ BX, BX
	CMPQ CX, $8
	JLT  one

two:
	VMOVUPD   (DI)(BX*8), Y0
	VMOVUPD   32(DI)(BX*8), Y1
	VCVTPS2PD (SI)(BX*4), Y2
	VCVTPS2PD 16(SI)(BX*4), Y3
	VFMADD231PD Y4, Y2, Y0
	VFMADD231PD Y4, Y3, Y1
	VMOVUPD   Y0, (DI)(BX*8)
	VMOVUPD   Y1, 32(DI)(BX*8)
	ADDQ $8, BX
	LEAQ 8(BX), AX
	CMPQ AX, CX
	JLE  two

one:
	CMPQ BX, CX
	JGE  done
	VMOVUPD   (DI)(BX*8), Y0
	VCVTPS2PD (SI)(BX*4), Y2
	VFMADD231PD Y4, Y2, Y0
	VMOVUPD   Y0, (DI)(BX*8)
	ADDQ $4, BX
	JMP  one

done:
	VZEROUPPER
	RET

// One vector of acc at element BX (ymm: four, zmm: eight) gets the four
// rows' products added in order x0..x3; V4..V7 hold a[0..3].
#define AXPY4(V0, V2, V4, V5, V6, V7) \
	VMOVUPD   (DI)(BX*8), V0; \
	VCVTPS2PD (R8)(BX*4), V2; \
	VFMADD231PD V4, V2, V0; \
	VCVTPS2PD (R9)(BX*4), V2; \
	VFMADD231PD V5, V2, V0; \
	VCVTPS2PD (R10)(BX*4), V2; \
	VFMADD231PD V6, V2, V0; \
	VCVTPS2PD (R11)(BX*4), V2; \
	VFMADD231PD V7, V2, V0; \
	VMOVUPD   V0, (DI)(BX*8)

// Per element the four rows are added in order x0, x1, x2, x3, each a
// separately rounded FMA.
// With z set (AVX-512), runs of eight go through one zmm per row first.
// func axpy4AVX2(acc *float64, x0, x1, x2, x3 *float32, a *float64, n int, z bool)
TEXT ·axpy4AVX2(SB), NOSPLIT, $0-57
	MOVQ acc+0(FP), DI
	MOVQ x0+8(FP), R8
	MOVQ x1+16(FP), R9
	MOVQ x2+24(FP), R10
	MOVQ x3+32(FP), R11
	MOVQ a+40(FP), AX
	MOVQ n+48(FP), CX
	XORQ BX, BX
	CMPB z+56(FP), $0
	JEQ  ymm4
	VBROADCASTSD 0(AX), Z4
	VBROADCASTSD 8(AX), Z5
	VBROADCASTSD 16(AX), Z6
	VBROADCASTSD 24(AX), Z7

zmm4:
	LEAQ 8(BX), DX
	CMPQ DX, CX
	JGT  ymm4
	AXPY4(Z0, Z2, Z4, Z5, Z6, Z7)
	MOVQ DX, BX
	JMP  zmm4

ymm4:
	VBROADCASTSD 0(AX), Y4
	VBROADCASTSD 8(AX), Y5
	VBROADCASTSD 16(AX), Y6
	VBROADCASTSD 24(AX), Y7
	LEAQ 8(BX), DX
	CMPQ DX, CX
	JGT  one4

two4:
	VMOVUPD   (DI)(BX*8), Y0
	VMOVUPD   32(DI)(BX*8), Y1
	VCVTPS2PD (R8)(BX*4), Y2
	VCVTPS2PD 16(R8)(BX*4), Y3
	VFMADD231PD Y4, Y2, Y0
	VFMADD231PD Y4, Y3, Y1
	VCVTPS2PD (R9)(BX*4), Y2
	VCVTPS2PD 16(R9)(BX*4), Y3
	VFMADD231PD Y5, Y2, Y0
	VFMADD231PD Y5, Y3, Y1
	VCVTPS2PD (R10)(BX*4), Y2
	VCVTPS2PD 16(R10)(BX*4), Y3
	VFMADD231PD Y6, Y2, Y0
	VFMADD231PD Y6, Y3, Y1
	VCVTPS2PD (R11)(BX*4), Y2
	VCVTPS2PD 16(R11)(BX*4), Y3
	VFMADD231PD Y7, Y2, Y0
	VFMADD231PD Y7, Y3, Y1
	VMOVUPD   Y0, (DI)(BX*8)
	VMOVUPD   Y1, 32(DI)(BX*8)
	ADDQ $8, BX
	LEAQ 8(BX), AX
	CMPQ AX, CX
	JLE  two4

one4:
	CMPQ BX, CX
	JGE  done4
	AXPY4(Y0, Y2, Y4, Y5, Y6, Y7)
	ADDQ $4, BX
	JMP  one4

done4:
	VZEROUPPER
	RET
