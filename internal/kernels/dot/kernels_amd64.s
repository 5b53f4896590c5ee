//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"

// R16 kernels for AVX2+FMA (F16 also needs F16C). Each kernel covers the
// first m elements of a row (m > 0, a multiple of 16) and returns the f64
// value of the R16 lane tree; the Go caller adds the sequential tail.
//
// The activation x arrives pre-widened to float64 by the caller, once per
// mat-vec. Four ymm accumulators hold the sixteen R16 lanes. For F32 and F16
// the lanes are in natural order: Y0 = a0..3, Y1 = a4..7, Y2 = a8..11,
// Y3 = a12..15, and x is widened in natural order. For BF16 a 16-byte load of
// eight bf16 values is split without shuffles into the even elements (shift
// left 16) and the odd ones (mask the high half), so the accumulators hold
// Y0 = a0,a2,a4,a6  Y1 = a1,a3,a5,a7  Y2 = a8,a10,a12,a14  Y3 = a9,a11,a13,a15
// and the caller permutes x the same way (xPermBF16 in dispatch_amd64.go).
// The reductions below rebuild exactly c_l = (a[l]+a[l+4]) + (a[l+8]+a[l+12])
// and (c0+c1) + (c2+c3) for either layout.
//
// FMA is allowed (§5.2): a product of two float32 values is exact in
// float64, so fused and unfused accumulation give the same bits.

// PFDIST is how far ahead of the current position in a weight row the
// kernels prefetch. Hardware prefetchers alone left single-goroutine bf16
// mat-vecs at ~9 GB/s on the development machine; prefetching 2 KiB ahead
// raised that to ~12 GB/s (distances of 512 B to 4 KiB measured; 2-4 KiB
// were best). Prefetching past the end of the weights is harmless: a
// prefetch never faults.
#define PFDIST 2048

// Eight bf16 at off(P) -> even elements as f64 in YE, odd ones in YO.
// X15 holds 0xffff0000 in every dword.
#define LOAD_BF16(off, P, XE, YE, XO, YO) \
	VMOVDQU off(P), XO; \
	VPSLLD $16, XO, XE; \
	VPAND X15, XO, XO; \
	VCVTPS2PD XE, YE; \
	VCVTPS2PD XO, YO

#define BF16_MASK \
	MOVL $0xffff0000, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, X15

// Four f16 at off(P) -> f64 in Y.
#define LOAD_F16(off, P, X, Y) \
	VCVTPH2PS off(P), X; \
	VCVTPS2PD X, Y

#define ZERO8 \
	VXORPD Y0, Y0, Y0; \
	VXORPD Y1, Y1, Y1; \
	VXORPD Y2, Y2, Y2; \
	VXORPD Y3, Y3, Y3; \
	VXORPD Y4, Y4, Y4; \
	VXORPD Y5, Y5, Y5; \
	VXORPD Y6, Y6, Y6; \
	VXORPD Y7, Y7, Y7

// ---------------------------------------------------------------- BF16

// func bf16Rows1(w *byte, x *float64, m int) float64
TEXT ·bf16Rows1(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DX
	MOVQ m+16(FP), CX
	ZERO8
	BF16_MASK

bf16r1loop:
	PREFETCHT0 PFDIST(SI)
	LOAD_BF16(0, SI, X8, Y8, X9, Y9)
	VFMADD231PD 0(DX), Y8, Y0
	VFMADD231PD 32(DX), Y9, Y1
	LOAD_BF16(16, SI, X10, Y10, X11, Y11)
	VFMADD231PD 64(DX), Y10, Y2
	VFMADD231PD 96(DX), Y11, Y3
	ADDQ $32, SI
	ADDQ $128, DX
	SUBQ $16, CX
	JNZ  bf16r1loop

	REDUCE_BF16(Y0, X0, Y1, X1, Y2, X2, Y3, X3, X8)
	VMOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// func bf16Rows2(w0, w1 *byte, x *float64, m int) (r0, r1 float64)
TEXT ·bf16Rows2(SB), NOSPLIT, $0-48
	MOVQ w0+0(FP), SI
	MOVQ w1+8(FP), DI
	MOVQ x+16(FP), DX
	MOVQ m+24(FP), CX
	ZERO8
	BF16_MASK

bf16r2loop:
	PREFETCHT0 PFDIST(SI)
	PREFETCHT0 PFDIST(DI)
	VMOVUPD 0(DX), Y12
	VMOVUPD 32(DX), Y13
	LOAD_BF16(0, SI, X8, Y8, X9, Y9)
	VFMADD231PD Y12, Y8, Y0
	VFMADD231PD Y13, Y9, Y1
	LOAD_BF16(0, DI, X10, Y10, X11, Y11)
	VFMADD231PD Y12, Y10, Y4
	VFMADD231PD Y13, Y11, Y5
	VMOVUPD 64(DX), Y12
	VMOVUPD 96(DX), Y13
	LOAD_BF16(16, SI, X8, Y8, X9, Y9)
	VFMADD231PD Y12, Y8, Y2
	VFMADD231PD Y13, Y9, Y3
	LOAD_BF16(16, DI, X10, Y10, X11, Y11)
	VFMADD231PD Y12, Y10, Y6
	VFMADD231PD Y13, Y11, Y7
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $128, DX
	SUBQ $16, CX
	JNZ  bf16r2loop

	REDUCE_BF16(Y0, X0, Y1, X1, Y2, X2, Y3, X3, X8)
	REDUCE_BF16(Y4, X4, Y5, X5, Y6, X6, Y7, X7, X8)
	VMOVSD X0, r0+32(FP)
	VMOVSD X4, r1+40(FP)
	VZEROUPPER
	RET

// func bf16Xs2(w *byte, x0, x1 *float64, m int) (r0, r1 float64)
TEXT ·bf16Xs2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), DX
	MOVQ x1+16(FP), BX
	MOVQ m+24(FP), CX
	ZERO8
	BF16_MASK

bf16x2loop:
	PREFETCHT0 PFDIST(SI)
	LOAD_BF16(0, SI, X8, Y8, X9, Y9)
	VFMADD231PD 0(DX), Y8, Y0
	VFMADD231PD 32(DX), Y9, Y1
	VFMADD231PD 0(BX), Y8, Y4
	VFMADD231PD 32(BX), Y9, Y5
	LOAD_BF16(16, SI, X10, Y10, X11, Y11)
	VFMADD231PD 64(DX), Y10, Y2
	VFMADD231PD 96(DX), Y11, Y3
	VFMADD231PD 64(BX), Y10, Y6
	VFMADD231PD 96(BX), Y11, Y7
	ADDQ $32, SI
	ADDQ $128, DX
	ADDQ $128, BX
	SUBQ $16, CX
	JNZ  bf16x2loop

	REDUCE_BF16(Y0, X0, Y1, X1, Y2, X2, Y3, X3, X8)
	REDUCE_BF16(Y4, X4, Y5, X5, Y6, X6, Y7, X7, X8)
	VMOVSD X0, r0+32(FP)
	VMOVSD X4, r1+40(FP)
	VZEROUPPER
	RET

// ---------------------------------------------------------------- F32

// func f32Rows1(w *byte, x *float64, m int) float64
TEXT ·f32Rows1(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DX
	MOVQ m+16(FP), CX
	ZERO8

f32r1loop:
	PREFETCHT0 PFDIST(SI)
	VCVTPS2PD 0(SI), Y8
	VFMADD231PD 0(DX), Y8, Y0
	VCVTPS2PD 16(SI), Y9
	VFMADD231PD 32(DX), Y9, Y1
	VCVTPS2PD 32(SI), Y10
	VFMADD231PD 64(DX), Y10, Y2
	VCVTPS2PD 48(SI), Y11
	VFMADD231PD 96(DX), Y11, Y3
	ADDQ $64, SI
	ADDQ $128, DX
	SUBQ $16, CX
	JNZ  f32r1loop

	REDUCE_NAT(Y0, X0, Y1, Y2, Y3, X8)
	VMOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// func f32Rows2(w0, w1 *byte, x *float64, m int) (r0, r1 float64)
TEXT ·f32Rows2(SB), NOSPLIT, $0-48
	MOVQ w0+0(FP), SI
	MOVQ w1+8(FP), DI
	MOVQ x+16(FP), DX
	MOVQ m+24(FP), CX
	ZERO8

f32r2loop:
	PREFETCHT0 PFDIST(SI)
	PREFETCHT0 PFDIST(DI)
	VMOVUPD 0(DX), Y12
	VCVTPS2PD 0(SI), Y8
	VCVTPS2PD 0(DI), Y9
	VFMADD231PD Y12, Y8, Y0
	VFMADD231PD Y12, Y9, Y4
	VMOVUPD 32(DX), Y13
	VCVTPS2PD 16(SI), Y10
	VCVTPS2PD 16(DI), Y11
	VFMADD231PD Y13, Y10, Y1
	VFMADD231PD Y13, Y11, Y5
	VMOVUPD 64(DX), Y12
	VCVTPS2PD 32(SI), Y8
	VCVTPS2PD 32(DI), Y9
	VFMADD231PD Y12, Y8, Y2
	VFMADD231PD Y12, Y9, Y6
	VMOVUPD 96(DX), Y13
	VCVTPS2PD 48(SI), Y10
	VCVTPS2PD 48(DI), Y11
	VFMADD231PD Y13, Y10, Y3
	VFMADD231PD Y13, Y11, Y7
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $128, DX
	SUBQ $16, CX
	JNZ  f32r2loop

	REDUCE_NAT(Y0, X0, Y1, Y2, Y3, X8)
	REDUCE_NAT(Y4, X4, Y5, Y6, Y7, X8)
	VMOVSD X0, r0+32(FP)
	VMOVSD X4, r1+40(FP)
	VZEROUPPER
	RET

// func f32Xs2(w *byte, x0, x1 *float64, m int) (r0, r1 float64)
TEXT ·f32Xs2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), DX
	MOVQ x1+16(FP), BX
	MOVQ m+24(FP), CX
	ZERO8

f32x2loop:
	PREFETCHT0 PFDIST(SI)
	VCVTPS2PD 0(SI), Y8
	VFMADD231PD 0(DX), Y8, Y0
	VFMADD231PD 0(BX), Y8, Y4
	VCVTPS2PD 16(SI), Y9
	VFMADD231PD 32(DX), Y9, Y1
	VFMADD231PD 32(BX), Y9, Y5
	VCVTPS2PD 32(SI), Y10
	VFMADD231PD 64(DX), Y10, Y2
	VFMADD231PD 64(BX), Y10, Y6
	VCVTPS2PD 48(SI), Y11
	VFMADD231PD 96(DX), Y11, Y3
	VFMADD231PD 96(BX), Y11, Y7
	ADDQ $64, SI
	ADDQ $128, DX
	ADDQ $128, BX
	SUBQ $16, CX
	JNZ  f32x2loop

	REDUCE_NAT(Y0, X0, Y1, Y2, Y3, X8)
	REDUCE_NAT(Y4, X4, Y5, Y6, Y7, X8)
	VMOVSD X0, r0+32(FP)
	VMOVSD X4, r1+40(FP)
	VZEROUPPER
	RET

// ---------------------------------------------------------------- F16

// func f16Rows1(w *byte, x *float64, m int) float64
TEXT ·f16Rows1(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DX
	MOVQ m+16(FP), CX
	ZERO8

f16r1loop:
	PREFETCHT0 PFDIST(SI)
	LOAD_F16(0, SI, X8, Y8)
	VFMADD231PD 0(DX), Y8, Y0
	LOAD_F16(8, SI, X9, Y9)
	VFMADD231PD 32(DX), Y9, Y1
	LOAD_F16(16, SI, X10, Y10)
	VFMADD231PD 64(DX), Y10, Y2
	LOAD_F16(24, SI, X11, Y11)
	VFMADD231PD 96(DX), Y11, Y3
	ADDQ $32, SI
	ADDQ $128, DX
	SUBQ $16, CX
	JNZ  f16r1loop

	REDUCE_NAT(Y0, X0, Y1, Y2, Y3, X8)
	VMOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// func f16Rows2(w0, w1 *byte, x *float64, m int) (r0, r1 float64)
TEXT ·f16Rows2(SB), NOSPLIT, $0-48
	MOVQ w0+0(FP), SI
	MOVQ w1+8(FP), DI
	MOVQ x+16(FP), DX
	MOVQ m+24(FP), CX
	ZERO8

f16r2loop:
	PREFETCHT0 PFDIST(SI)
	PREFETCHT0 PFDIST(DI)
	VMOVUPD 0(DX), Y12
	LOAD_F16(0, SI, X8, Y8)
	LOAD_F16(0, DI, X9, Y9)
	VFMADD231PD Y12, Y8, Y0
	VFMADD231PD Y12, Y9, Y4
	VMOVUPD 32(DX), Y13
	LOAD_F16(8, SI, X10, Y10)
	LOAD_F16(8, DI, X11, Y11)
	VFMADD231PD Y13, Y10, Y1
	VFMADD231PD Y13, Y11, Y5
	VMOVUPD 64(DX), Y12
	LOAD_F16(16, SI, X8, Y8)
	LOAD_F16(16, DI, X9, Y9)
	VFMADD231PD Y12, Y8, Y2
	VFMADD231PD Y12, Y9, Y6
	VMOVUPD 96(DX), Y13
	LOAD_F16(24, SI, X10, Y10)
	LOAD_F16(24, DI, X11, Y11)
	VFMADD231PD Y13, Y10, Y3
	VFMADD231PD Y13, Y11, Y7
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $128, DX
	SUBQ $16, CX
	JNZ  f16r2loop

	REDUCE_NAT(Y0, X0, Y1, Y2, Y3, X8)
	REDUCE_NAT(Y4, X4, Y5, Y6, Y7, X8)
	VMOVSD X0, r0+32(FP)
	VMOVSD X4, r1+40(FP)
	VZEROUPPER
	RET

// func f16Xs2(w *byte, x0, x1 *float64, m int) (r0, r1 float64)
TEXT ·f16Xs2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), DX
	MOVQ x1+16(FP), BX
	MOVQ m+24(FP), CX
	ZERO8

f16x2loop:
	PREFETCHT0 PFDIST(SI)
	LOAD_F16(0, SI, X8, Y8)
	VFMADD231PD 0(DX), Y8, Y0
	VFMADD231PD 0(BX), Y8, Y4
	LOAD_F16(8, SI, X9, Y9)
	VFMADD231PD 32(DX), Y9, Y1
	VFMADD231PD 32(BX), Y9, Y5
	LOAD_F16(16, SI, X10, Y10)
	VFMADD231PD 64(DX), Y10, Y2
	VFMADD231PD 64(BX), Y10, Y6
	LOAD_F16(24, SI, X11, Y11)
	VFMADD231PD 96(DX), Y11, Y3
	VFMADD231PD 96(BX), Y11, Y7
	ADDQ $32, SI
	ADDQ $128, DX
	ADDQ $128, BX
	SUBQ $16, CX
	JNZ  f16x2loop

	REDUCE_NAT(Y0, X0, Y1, Y2, Y3, X8)
	REDUCE_NAT(Y4, X4, Y5, Y6, Y7, X8)
	VMOVSD X0, r0+32(FP)
	VMOVSD X4, r1+40(FP)
	VZEROUPPER
	RET
