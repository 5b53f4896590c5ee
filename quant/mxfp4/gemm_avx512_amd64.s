//go:build amd64 && !purego

#include "textflag.h"

// The packed MXFP4 mat-mul (gemm_avx512_amd64.go): codes of eight weight
// rows decoded once into a float64 panel, one row per lane.

// The E2M1 tables ·e2m1lo and ·e2m1hi are kernel_avx512_amd64.s's.

// func decodeBlock(dst *float64, packed *byte, offs *[8]int64, n int)
//
// For the eight weight rows at packed+offs[r] and their first 16n columns
// from packed:
// dst[8c+r] = E2M1(code of row r, column c), unscaled (the kernel applies
// the group scales after each group's tree, as the reduction does). Eight
// bytes of every row are gathered at once, one row per lane, and each
// nibble is brought to the bottom of its lane for the table lookup.
TEXT ·decodeBlock(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ packed+8(FP), SI
	MOVQ offs+16(FP), AX
	MOVQ n+24(FP), CX
	VMOVDQU64 (AX), Z30
	VMOVUPD   ·e2m1lo(SB), Z28
	VMOVUPD   ·e2m1hi(SB), Z29

dblock:
	KXNORW K1, K1, K1
	VPGATHERQQ (SI)(Z30*1), K1, Z0
	VMOVDQA64 Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 0(DI)
	VPSRLQ $4, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 64(DI)
	VPSRLQ $8, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 128(DI)
	VPSRLQ $12, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 192(DI)
	VPSRLQ $16, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 256(DI)
	VPSRLQ $20, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 320(DI)
	VPSRLQ $24, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 384(DI)
	VPSRLQ $28, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 448(DI)
	VPSRLQ $32, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 512(DI)
	VPSRLQ $36, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 576(DI)
	VPSRLQ $40, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 640(DI)
	VPSRLQ $44, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 704(DI)
	VPSRLQ $48, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 768(DI)
	VPSRLQ $52, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 832(DI)
	VPSRLQ $56, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 896(DI)
	VPSRLQ $60, Z0, Z1
	VPERMI2PD Z29, Z28, Z1
	VMOVUPD Z1, 960(DI)
	ADDQ $8, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ  dblock
	VZEROUPPER
	RET

// GROUPADD multiplies the group sums G by the scales SC and adds them into
// the sums S in the lanes K1 marks (the scale is not NaN).
#define GROUPADD(SC, G, S) \
	VMULPD SC, G, G; \
	VADDPD G, S, K1, S

// G8COL is column c of a group: the panel vector of the eight rows at
// w(SI) against the activations at x of the three rows, into lane class
// c mod 8's accumulators A (row x0), B (x1), C (x2); OP multiplies the first
// column of each class and fuses the adds of the rest.
#define G8COL(OP, w, x, A, B, C) \
	VMOVUPD w(SI), Z27; \
	OP x(DX), Z27, A; \
	OP x(R8), Z27, B; \
	OP x(R9), Z27, C

// G8TREE reduces the eight lane classes A0..A7 of one activation row with
// RG's tree, ((s0+s4)+(s1+s5))+((s2+s6)+(s3+s7)), into A0.
#define G8TREE(A0, A1, A2, A3, A4, A5, A6, A7) \
	VADDPD A4, A0, A0; \
	VADDPD A5, A1, A1; \
	VADDPD A6, A2, A2; \
	VADDPD A7, A3, A3; \
	VADDPD A1, A0, A0; \
	VADDPD A3, A2, A2; \
	VADDPD A2, A0, A0

// GEMMGROUP is one group of 32 columns of eight weight rows (the panel
// vectors at SI, one row per lane) for three activation rows (float64s at
// DX, R8, R9): the RG lanes of activation row p are Z(8p)..Z(8p+7), column
// j of the group going to lane j mod 8 (multiplied first, then fused-added
// in ascending j), and each activation row's lanes are reduced with the RG
// tree into Z(8p), lane r holding weight row r's group sum.
#define GEMMGROUP \
	G8COL(VMULPD.BCST, 0, 0, Z0, Z8, Z16); \
	G8COL(VMULPD.BCST, 64, 8, Z1, Z9, Z17); \
	G8COL(VMULPD.BCST, 128, 16, Z2, Z10, Z18); \
	G8COL(VMULPD.BCST, 192, 24, Z3, Z11, Z19); \
	G8COL(VMULPD.BCST, 256, 32, Z4, Z12, Z20); \
	G8COL(VMULPD.BCST, 320, 40, Z5, Z13, Z21); \
	G8COL(VMULPD.BCST, 384, 48, Z6, Z14, Z22); \
	G8COL(VMULPD.BCST, 448, 56, Z7, Z15, Z23); \
	G8COL(VFMADD231PD.BCST, 512, 64, Z0, Z8, Z16); \
	G8COL(VFMADD231PD.BCST, 576, 72, Z1, Z9, Z17); \
	G8COL(VFMADD231PD.BCST, 640, 80, Z2, Z10, Z18); \
	G8COL(VFMADD231PD.BCST, 704, 88, Z3, Z11, Z19); \
	G8COL(VFMADD231PD.BCST, 768, 96, Z4, Z12, Z20); \
	G8COL(VFMADD231PD.BCST, 832, 104, Z5, Z13, Z21); \
	G8COL(VFMADD231PD.BCST, 896, 112, Z6, Z14, Z22); \
	G8COL(VFMADD231PD.BCST, 960, 120, Z7, Z15, Z23); \
	G8COL(VFMADD231PD.BCST, 1024, 128, Z0, Z8, Z16); \
	G8COL(VFMADD231PD.BCST, 1088, 136, Z1, Z9, Z17); \
	G8COL(VFMADD231PD.BCST, 1152, 144, Z2, Z10, Z18); \
	G8COL(VFMADD231PD.BCST, 1216, 152, Z3, Z11, Z19); \
	G8COL(VFMADD231PD.BCST, 1280, 160, Z4, Z12, Z20); \
	G8COL(VFMADD231PD.BCST, 1344, 168, Z5, Z13, Z21); \
	G8COL(VFMADD231PD.BCST, 1408, 176, Z6, Z14, Z22); \
	G8COL(VFMADD231PD.BCST, 1472, 184, Z7, Z15, Z23); \
	G8COL(VFMADD231PD.BCST, 1536, 192, Z0, Z8, Z16); \
	G8COL(VFMADD231PD.BCST, 1600, 200, Z1, Z9, Z17); \
	G8COL(VFMADD231PD.BCST, 1664, 208, Z2, Z10, Z18); \
	G8COL(VFMADD231PD.BCST, 1728, 216, Z3, Z11, Z19); \
	G8COL(VFMADD231PD.BCST, 1792, 224, Z4, Z12, Z20); \
	G8COL(VFMADD231PD.BCST, 1856, 232, Z5, Z13, Z21); \
	G8COL(VFMADD231PD.BCST, 1920, 240, Z6, Z14, Z22); \
	G8COL(VFMADD231PD.BCST, 1984, 248, Z7, Z15, Z23); \
	G8TREE(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7); \
	G8TREE(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15); \
	G8TREE(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)

// The six-row kernel's lane-group registers: position p's four live
// values of RG's tree are slots A–D in Z(4p)..Z(4p+3).

// COL6 is one column of a group for six activation rows: the panel vector
// at w(SI) into W, times each row's activation at x into its slot register
// (OP multiplies the first column of a lane class and fuses the rest).
#define COL6(OP, W, w, x, R0, R1, R2, R3, R4, R5) \
	VMOVUPD w(SI), W; \
	OP x(DX), W, R0; \
	OP x(DX)(BX*1), W, R1; \
	OP x(DX)(BX*2), W, R2; \
	OP x(R8), W, R3; \
	OP x(R8)(BX*1), W, R4; \
	OP x(R8)(BX*2), W, R5

#define COLA(OP, W, w, x) COL6(OP, W, w, x, Z0, Z4, Z8, Z12, Z16, Z20)
#define COLB(OP, W, w, x) COL6(OP, W, w, x, Z1, Z5, Z9, Z13, Z17, Z21)
#define COLC(OP, W, w, x) COL6(OP, W, w, x, Z2, Z6, Z10, Z14, Z18, Z22)
#define COLD(OP, W, w, x) COL6(OP, W, w, x, Z3, Z7, Z11, Z15, Z19, Z23)

// ADD6 adds the slot R into the slot L of every activation row (L = L + R,
// L the first operand, as in G8TREE).
#define ADD6(R0, R1, R2, R3, R4, R5, L0, L1, L2, L3, L4, L5) \
	VADDPD R0, L0, L0; \
	VADDPD R1, L1, L1; \
	VADDPD R2, L2, L2; \
	VADDPD R3, L3, L3; \
	VADDPD R4, L4, L4; \
	VADDPD R5, L5, L5

#define ADDBA ADD6(Z1, Z5, Z9, Z13, Z17, Z21, Z0, Z4, Z8, Z12, Z16, Z20)
#define ADDCB ADD6(Z2, Z6, Z10, Z14, Z18, Z22, Z1, Z5, Z9, Z13, Z17, Z21)
#define ADDDC ADD6(Z3, Z7, Z11, Z15, Z19, Z23, Z2, Z6, Z10, Z14, Z18, Z22)

// CLASSES runs the lane classes a (into slot SA) and b (slot SB) of a
// group, a column of each at a time; wa, xa and wb, xb are the panel and
// activation offsets of their first columns.
#define CLASSES(SA, SB, wa, xa, wb, xb) \
	SA(VMULPD.BCST, Z30, wa, xa); \
	SB(VMULPD.BCST, Z31, wb, xb); \
	SA(VFMADD231PD.BCST, Z30, wa+512, xa+64); \
	SB(VFMADD231PD.BCST, Z31, wb+512, xb+64); \
	SA(VFMADD231PD.BCST, Z30, wa+1024, xa+128); \
	SB(VFMADD231PD.BCST, Z31, wb+1024, xb+128); \
	SA(VFMADD231PD.BCST, Z30, wa+1536, xa+192); \
	SB(VFMADD231PD.BCST, Z31, wb+1536, xb+192)

// func gemm8x6(dst *float32, dstride int, w *float64, x *float64, xstride int, sc *float64, st *float64, groups int, first, last bool)
//
// gemm8x3 for six activation rows at x + p·xstride, all real. Three rows
// need a load of the panel vector for every three fused adds, and the
// loads, not the adds, bounded it; six rows cannot keep all eight lane
// classes of each in registers, so a group runs class by class in the
// order of RG's tree, ((s0+s4)+(s1+s5))+((s2+s6)+(s3+s7)), each tree sum
// formed as soon as its operands are: four values per row are ever live.
// Every class still takes its columns in ascending order and every
// addition its operands in G8TREE's order, so the bits are gemm8x3's.
TEXT ·gemm8x6(SB), NOSPLIT, $0-66
	MOVQ w+16(FP), SI
	MOVQ x+24(FP), DX
	MOVQ xstride+32(FP), BX
	LEAQ (DX)(BX*2), R8
	ADDQ BX, R8
	MOVQ sc+40(FP), DI
	MOVQ st+48(FP), R10
	MOVQ groups+56(FP), CX
	VPXORQ Z24, Z24, Z24
	VPXORQ Z25, Z25, Z25
	VPXORQ Z26, Z26, Z26
	VPXORQ Z27, Z27, Z27
	VPXORQ Z28, Z28, Z28
	VPXORQ Z29, Z29, Z29
	CMPB first+64(FP), $0
	JNE  g6grp
	VMOVUPD 0(R10), Z24
	VMOVUPD 64(R10), Z25
	VMOVUPD 128(R10), Z26
	VMOVUPD 192(R10), Z27
	VMOVUPD 256(R10), Z28
	VMOVUPD 320(R10), Z29

g6grp:
	CLASSES(COLA, COLB, 0, 0, 256, 32)
	ADDBA
	CLASSES(COLB, COLC, 64, 8, 320, 40)
	ADDCB
	ADDBA
	CLASSES(COLB, COLC, 128, 16, 384, 48)
	ADDCB
	CLASSES(COLC, COLD, 192, 24, 448, 56)
	ADDDC
	ADDCB
	ADDBA
	VMOVUPD (DI), Z30
	VCMPPD  $7, Z30, Z30, K1
	GROUPADD(Z30, Z0, Z24)
	GROUPADD(Z30, Z4, Z25)
	GROUPADD(Z30, Z8, Z26)
	GROUPADD(Z30, Z12, Z27)
	GROUPADD(Z30, Z16, Z28)
	GROUPADD(Z30, Z20, Z29)
	ADDQ $2048, SI
	ADDQ $256, DX
	ADDQ $256, R8
	ADDQ $64, DI
	DECQ CX
	JNZ  g6grp

	CMPB last+65(FP), $0
	JNE  g6out
	VMOVUPD Z24, 0(R10)
	VMOVUPD Z25, 64(R10)
	VMOVUPD Z26, 128(R10)
	VMOVUPD Z27, 192(R10)
	VMOVUPD Z28, 256(R10)
	VMOVUPD Z29, 320(R10)
	VZEROUPPER
	RET

g6out:
	MOVQ dst+0(FP), AX
	MOVQ dstride+8(FP), BX
	LEAQ (AX)(BX*2), R11
	ADDQ BX, R11
	VCVTPD2PS Z24, Y24
	VMOVUPS   Y24, (AX)
	VCVTPD2PS Z25, Y25
	VMOVUPS   Y25, (AX)(BX*1)
	VCVTPD2PS Z26, Y26
	VMOVUPS   Y26, (AX)(BX*2)
	VCVTPD2PS Z27, Y27
	VMOVUPS   Y27, (R11)
	VCVTPD2PS Z28, Y28
	VMOVUPS   Y28, (R11)(BX*1)
	VCVTPD2PS Z29, Y29
	VMOVUPS   Y29, (R11)(BX*2)
	VZEROUPPER
	RET

// func gemm8x3(dst *float32, dstride int, w *float64, x0, x1, x2 *float64, sc *float64, st *float64, groups, np int, first, last bool)
//
// For eight weight rows (panel at w) and the activation rows x0..x2 (np of
// them real; the others repeat one and are not stored): starting from the
// three sums vectors at st (zero when first is set), per group the group
// sums times the scales at sc (eight per group) are added into each
// activation row's sums, in group order, in the lanes whose scale is not
// NaN (the caller's mark of scale 255, which contributes nothing). The
// sums go back to st, or, when last is set, are rounded to float32 and
// stored at dst + p·dstride, eight rows each.
TEXT ·gemm8x3(SB), NOSPLIT, $0-82
	MOVQ w+16(FP), SI
	MOVQ x0+24(FP), DX
	MOVQ x1+32(FP), R8
	MOVQ x2+40(FP), R9
	MOVQ sc+48(FP), DI
	MOVQ st+56(FP), R10
	MOVQ groups+64(FP), CX
	VPXORQ Z24, Z24, Z24
	VPXORQ Z25, Z25, Z25
	VPXORQ Z26, Z26, Z26
	CMPB first+80(FP), $0
	JNE  g8grp
	VMOVUPD 0(R10), Z24
	VMOVUPD 64(R10), Z25
	VMOVUPD 128(R10), Z26

g8grp:
	GEMMGROUP
	VMOVUPD (DI), Z28
	VCMPPD  $7, Z28, Z28, K1
	GROUPADD(Z28, Z0, Z24)
	GROUPADD(Z28, Z8, Z25)
	GROUPADD(Z28, Z16, Z26)
	ADDQ $2048, SI
	ADDQ $256, DX
	ADDQ $256, R8
	ADDQ $256, R9
	ADDQ $64, DI
	DECQ CX
	JNZ  g8grp

	CMPB last+81(FP), $0
	JNE  g8out
	VMOVUPD Z24, 0(R10)
	VMOVUPD Z25, 64(R10)
	VMOVUPD Z26, 128(R10)
	VZEROUPPER
	RET

g8out:
	MOVQ dst+0(FP), AX
	MOVQ dstride+8(FP), BX
	MOVQ np+72(FP), R11
	VCVTPD2PS Z24, Y24
	VMOVUPS   Y24, (AX)
	CMPQ R11, $2
	JLT  g8done
	VCVTPD2PS Z25, Y25
	VMOVUPS   Y25, (AX)(BX*1)
	CMPQ R11, $3
	JLT  g8done
	VCVTPD2PS Z26, Y26
	VMOVUPS   Y26, (AX)(BX*2)

g8done:
	VZEROUPPER
	RET

// func widen64(dst *float64, x *float32, n int)
//
// dst[i] = float64(x[i]) for i < n, n a multiple of 16.
TEXT ·widen64(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   wdone

wloop:
	VCVTPS2PD 0(SI), Z0
	VCVTPS2PD 32(SI), Z1
	VMOVUPD Z0, 0(DI)
	VMOVUPD Z1, 64(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  wloop

wdone:
	VZEROUPPER
	RET
