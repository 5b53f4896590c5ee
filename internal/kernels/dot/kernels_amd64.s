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

// Three weight rows against four activation rows, for many-row mat-muls. The
// sixteen R16 lanes of one output are four ymm vectors (the quarters Q0–Q3 of
// the bf16 layout above: evens then odds of each eight columns), so the twelve
// outputs of a pass would need 48 accumulators; the kernel instead makes four
// passes over the columns, one per quarter, each with twelve accumulators
// (output 4i+t, weight row i against activation row t, in Y(4i+t)), the three
// rows' widened quarter in Y12–Y14 and the activation in Y15. A quarter needs
// only its half of each weight load and its one split (shift for the evens,
// mask for the odds), so the four passes widen every weight exactly once, as
// the one-row kernels do; what a pass repeats is the 16-byte load, which the
// caller's column blocks (matMulPairs) keep in L1. Twelve chains, one fused
// add per step each, keep both FMA pipes busier than eight (two weight rows),
// which wait on the FMA latency (-bench 'MatMulLevel/bf16/avx2' against the
// two-activation kernel, and -bench FMAPeak for the ceiling: the README's
// section on CPUs without AVX-512); the widening's conversions take FMA-pipe
// slots, which bounds the rest. The
// registers are all taken, so the odd quarters mask from memory.
//
// The accumulators resume from and return to acc unreduced: output e keeps
// its quarters at acc[16e+4q : 16e+4q+4], so bf16Reduce12 can apply
// REDUCE_BF16 to them. Each lane still adds its columns in ascending order
// from +0, one fused add per product. The bases point at the rows' ends and
// CX runs from -m (R12) to 0, so a step pays one add for its seven streams.
//
// The first quarter's pass, the one that brings the weights in from L2 or
// memory, also prefetches the same columns pf bytes past each of its rows:
// matMulPairs reads a block of rows a column block at a time, so each call
// touches three 1 KiB pieces 3·rb bytes after the last call's, a pattern
// the hardware prefetcher does not follow, and passes pf = 3·rb, the next
// call's rows. -bench 'MatMulLevel/bf16/avx2' at 3072×3584, two runs each
// alternating with the kernel without it: n4 10.1–10.6 → 13.4–13.7 GMAC/s,
// n6 9.9–10.4 → 11.9–12.0, n8 11.2–12.5 → 12.8–13.1, n16 and n256 within
// the noise (their later groups find the rows in L2). Prefetching two calls
// ahead, or spreading the prefetches over the first two passes, measured the
// same.
DATA bf16HiMask<>+0(SB)/4, $0xffff0000
DATA bf16HiMask<>+4(SB)/4, $0xffff0000
DATA bf16HiMask<>+8(SB)/4, $0xffff0000
DATA bf16HiMask<>+12(SB)/4, $0xffff0000
GLOBL bf16HiMask<>(SB), RODATA|NOPTR, $16

#define BF16_EVEN(X) VPSLLD $16, X, X
#define BF16_ODD_MEM(X) VPAND bf16HiMask<>(SB), X, X

#define R3X4_WEIGHT(WOFF, P, SPLIT, X, Y) \
	VMOVDQU WOFF(P)(CX*2), X; \
	SPLIT(X); \
	VCVTPS2PD X, Y

#define R3X4_ACT(XOFF, P, A0, A1, A2) \
	VMOVUPD XOFF(P)(CX*8), Y15; \
	VFMADD231PD Y15, Y12, A0; \
	VFMADD231PD Y15, Y13, A1; \
	VFMADD231PD Y15, Y14, A2

#define R3X4_PF(WOFF) \
	PREFETCHT0 WOFF(R11)(CX*2); \
	PREFETCHT0 WOFF(R13)(CX*2); \
	PREFETCHT0 WOFF(R14)(CX*2)

#define R3X4_NOPF(WOFF)

#define R3X4_QUARTER(LOOP, WOFF, SPLIT, XOFF, PF) \
	VMOVUPD XOFF+0(AX), Y0; \
	VMOVUPD XOFF+128(AX), Y1; \
	VMOVUPD XOFF+256(AX), Y2; \
	VMOVUPD XOFF+384(AX), Y3; \
	VMOVUPD XOFF+512(AX), Y4; \
	VMOVUPD XOFF+640(AX), Y5; \
	VMOVUPD XOFF+768(AX), Y6; \
	VMOVUPD XOFF+896(AX), Y7; \
	VMOVUPD XOFF+1024(AX), Y8; \
	VMOVUPD XOFF+1152(AX), Y9; \
	VMOVUPD XOFF+1280(AX), Y10; \
	VMOVUPD XOFF+1408(AX), Y11; \
	MOVQ R12, CX; \
LOOP: \
	PF(WOFF); \
	R3X4_WEIGHT(WOFF, SI, SPLIT, X12, Y12); \
	R3X4_WEIGHT(WOFF, DI, SPLIT, X13, Y13); \
	R3X4_WEIGHT(WOFF, R10, SPLIT, X14, Y14); \
	R3X4_ACT(XOFF, DX, Y0, Y4, Y8); \
	R3X4_ACT(XOFF, BX, Y1, Y5, Y9); \
	R3X4_ACT(XOFF, R8, Y2, Y6, Y10); \
	R3X4_ACT(XOFF, R9, Y3, Y7, Y11); \
	ADDQ $16, CX; \
	JNZ  LOOP; \
	VMOVUPD Y0, XOFF+0(AX); \
	VMOVUPD Y1, XOFF+128(AX); \
	VMOVUPD Y2, XOFF+256(AX); \
	VMOVUPD Y3, XOFF+384(AX); \
	VMOVUPD Y4, XOFF+512(AX); \
	VMOVUPD Y5, XOFF+640(AX); \
	VMOVUPD Y6, XOFF+768(AX); \
	VMOVUPD Y7, XOFF+896(AX); \
	VMOVUPD Y8, XOFF+1024(AX); \
	VMOVUPD Y9, XOFF+1152(AX); \
	VMOVUPD Y10, XOFF+1280(AX); \
	VMOVUPD Y11, XOFF+1408(AX)

// func bf16R3Xs4(w0, w1, w2 *byte, x0, x1, x2, x3 *float64, m int, acc *[192]float64, pf int)
TEXT ·bf16R3Xs4(SB), NOSPLIT, $0-80
	MOVQ m+56(FP), CX
	MOVQ CX, R12
	NEGQ R12
	MOVQ w0+0(FP), SI
	MOVQ w1+8(FP), DI
	MOVQ w2+16(FP), R10
	MOVQ x0+24(FP), DX
	MOVQ x1+32(FP), BX
	MOVQ x2+40(FP), R8
	MOVQ x3+48(FP), R9
	LEAQ (SI)(CX*2), SI
	LEAQ (DI)(CX*2), DI
	LEAQ (R10)(CX*2), R10
	LEAQ (DX)(CX*8), DX
	LEAQ (BX)(CX*8), BX
	LEAQ (R8)(CX*8), R8
	LEAQ (R9)(CX*8), R9
	MOVQ acc+64(FP), AX
	MOVQ pf+72(FP), R11
	LEAQ (DI)(R11*1), R13
	LEAQ (R10)(R11*1), R14
	ADDQ SI, R11
	R3X4_QUARTER(bf16r3x4q0, 0, BF16_EVEN, 0, R3X4_PF)
	R3X4_QUARTER(bf16r3x4q1, 0, BF16_ODD_MEM, 32, R3X4_NOPF)
	R3X4_QUARTER(bf16r3x4q2, 16, BF16_EVEN, 64, R3X4_NOPF)
	R3X4_QUARTER(bf16r3x4q3, 16, BF16_ODD_MEM, 96, R3X4_NOPF)
	VZEROUPPER
	RET

// bf16Reduce12 reduces the twelve outputs bf16R3Xs4 left in acc by the R16
// tree (REDUCE_BF16, as the one-row kernels end) and writes their heads to r
// in the same order.
#define REDUCE_ACC_BF16(E) \
	VMOVUPD (E*128)(SI), Y0; \
	VMOVUPD (E*128+32)(SI), Y1; \
	VMOVUPD (E*128+64)(SI), Y2; \
	VMOVUPD (E*128+96)(SI), Y3; \
	REDUCE_BF16(Y0, X0, Y1, X1, Y2, X2, Y3, X3, X8); \
	VMOVSD X0, (E*8)(DI)

// func bf16Reduce12(acc *[192]float64, r *[12]float64)
TEXT ·bf16Reduce12(SB), NOSPLIT, $0-16
	MOVQ acc+0(FP), SI
	MOVQ r+8(FP), DI
	REDUCE_ACC_BF16(0)
	REDUCE_ACC_BF16(1)
	REDUCE_ACC_BF16(2)
	REDUCE_ACC_BF16(3)
	REDUCE_ACC_BF16(4)
	REDUCE_ACC_BF16(5)
	REDUCE_ACC_BF16(6)
	REDUCE_ACC_BF16(7)
	REDUCE_ACC_BF16(8)
	REDUCE_ACC_BF16(9)
	REDUCE_ACC_BF16(10)
	REDUCE_ACC_BF16(11)
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

// fmaPeakAVX2 runs n rounds of 12 independent ymm FMAs on registers: the
// AVX2 level's float64 multiply-add ceiling for BenchmarkFMAPeak (no other
// use). Twelve chains cover the latency of two FMA pipes.
//
// func fmaPeakAVX2(n int)
TEXT ·fmaPeakAVX2(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	ZERO8
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y14, Y14, Y14
	VXORPD Y15, Y15, Y15

fpeak2:
	VFMADD231PD Y14, Y15, Y0
	VFMADD231PD Y14, Y15, Y1
	VFMADD231PD Y14, Y15, Y2
	VFMADD231PD Y14, Y15, Y3
	VFMADD231PD Y14, Y15, Y4
	VFMADD231PD Y14, Y15, Y5
	VFMADD231PD Y14, Y15, Y6
	VFMADD231PD Y14, Y15, Y7
	VFMADD231PD Y14, Y15, Y8
	VFMADD231PD Y14, Y15, Y9
	VFMADD231PD Y14, Y15, Y10
	VFMADD231PD Y14, Y15, Y11
	DECQ CX
	JNZ  fpeak2
	VZEROUPPER
	RET
