//go:build amd64 && !purego

#include "textflag.h"

// Nibble mask for VPAND.
DATA nibmask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibmask<>(SB), RODATA|NOPTR, $32

// Per-dword shift counts: the low half keeps the low nibbles (even
// columns), the high half brings the high nibbles (odd columns) down.
DATA shifts<>+0(SB)/8, $0
DATA shifts<>+8(SB)/8, $0
DATA shifts<>+16(SB)/8, $0x0000000400000004
DATA shifts<>+24(SB)/8, $0x0000000400000004
GLOBL shifts<>(SB), RODATA|NOPTR, $32

// Bits 48..55 (lotab) and 56..63 (hitab) of float64(E2M1(code)) for codes
// 0..15; the lower 48 bits of every E2M1 value are zero.
DATA lotab<>+0(SB)/8, $0x18100800f8f0e000
DATA lotab<>+8(SB)/8, $0x18100800f8f0e000
DATA lotab<>+16(SB)/8, $0x18100800f8f0e000
DATA lotab<>+24(SB)/8, $0x18100800f8f0e000
GLOBL lotab<>(SB), RODATA|NOPTR, $32
DATA hitab<>+0(SB)/8, $0x404040403f3f3f00
DATA hitab<>+8(SB)/8, $0xc0c0c0c0bfbfbf80
DATA hitab<>+16(SB)/8, $0x404040403f3f3f00
DATA hitab<>+24(SB)/8, $0xc0c0c0c0bfbfbf80
GLOBL hitab<>(SB), RODATA|NOPTR, $32

// VPSHUFB masks moving two 16-bit patterns per 128-bit half into the top of
// two float64 lanes (other bytes zero): A0 words 0,1; B0 2,3; A1 4,5; B1 6,7.
DATA idxa0<>+0(SB)/8, $0x0100808080808080
DATA idxa0<>+8(SB)/8, $0x0302808080808080
DATA idxa0<>+16(SB)/8, $0x0100808080808080
DATA idxa0<>+24(SB)/8, $0x0302808080808080
GLOBL idxa0<>(SB), RODATA|NOPTR, $32
DATA idxb0<>+0(SB)/8, $0x0504808080808080
DATA idxb0<>+8(SB)/8, $0x0706808080808080
DATA idxb0<>+16(SB)/8, $0x0504808080808080
DATA idxb0<>+24(SB)/8, $0x0706808080808080
GLOBL idxb0<>(SB), RODATA|NOPTR, $32
DATA idxa1<>+0(SB)/8, $0x0908808080808080
DATA idxa1<>+8(SB)/8, $0x0b0a808080808080
DATA idxa1<>+16(SB)/8, $0x0908808080808080
DATA idxa1<>+24(SB)/8, $0x0b0a808080808080
GLOBL idxa1<>(SB), RODATA|NOPTR, $32
DATA idxb1<>+0(SB)/8, $0x0d0c808080808080
DATA idxb1<>+8(SB)/8, $0x0f0e808080808080
DATA idxb1<>+16(SB)/8, $0x0d0c808080808080
DATA idxb1<>+24(SB)/8, $0x0f0e808080808080
GLOBL idxb1<>(SB), RODATA|NOPTR, $32

// Four qwords of 896 (float64 exponent field of 2^(s-127) is s+896) and 255.
DATA bias896<>+0(SB)/8, $896
DATA bias896<>+8(SB)/8, $896
DATA bias896<>+16(SB)/8, $896
DATA bias896<>+24(SB)/8, $896
GLOBL bias896<>(SB), RODATA|NOPTR, $32
DATA nan255<>+0(SB)/8, $255
DATA nan255<>+8(SB)/8, $255
DATA nan255<>+16(SB)/8, $255
DATA nan255<>+24(SB)/8, $255
GLOBL nan255<>(SB), RODATA|NOPTR, $32

// MX_DECODE decodes the group of 32 columns whose 16 packed bytes are at
// GOFF(SI) into the 16-bit top patterns of its values, columns 0..15 in Y3
// and 16..31 in Y4 (tables in Y15, Y14; clobbers Y0–Y2).
#define MX_DECODE(GOFF) \
	VBROADCASTI128 GOFF(SI), Y0; \
	VPSRLVD        shifts<>(SB), Y0, Y0; \
	VPAND          nibmask<>(SB), Y0, Y0; \
	VPSHUFB        Y0, Y15, Y1; \
	VPSHUFB        Y0, Y14, Y2; \
	VPUNPCKLBW     Y2, Y1, Y3; \
	VPUNPCKHBW     Y2, Y1, Y4

// MX_GROUP1 multiplies the group at GOFF(SI) by one row of activations at
// XO(R11) and leaves its lanes A+B in G (placement masks in Y13–Y10).
#define MX_GROUP1(GOFF, XO, G) \
	MX_DECODE(GOFF); \
	VPSHUFB     Y13, Y3, Y2; \
	VMULPD      XO+0(R11), Y2, Y0; \
	VPSHUFB     Y12, Y3, Y2; \
	VMULPD      XO+32(R11), Y2, Y1; \
	VPSHUFB     Y11, Y3, Y2; \
	VFMADD231PD XO+64(R11), Y2, Y0; \
	VPSHUFB     Y10, Y3, Y2; \
	VFMADD231PD XO+96(R11), Y2, Y1; \
	VPSHUFB     Y13, Y4, Y2; \
	VFMADD231PD XO+128(R11), Y2, Y0; \
	VPSHUFB     Y12, Y4, Y2; \
	VFMADD231PD XO+160(R11), Y2, Y1; \
	VPSHUFB     Y11, Y4, Y2; \
	VFMADD231PD XO+192(R11), Y2, Y0; \
	VPSHUFB     Y10, Y4, Y2; \
	VFMADD231PD XO+224(R11), Y2, Y1; \
	VADDPD      Y1, Y0, G

// MX_SUB reduces one group vector G (XG its low half) to its RG subtotal
// (T[0]+T[2]) + (T[1]+T[3]) in the low lane of XG; clobbers X1.
#define MX_SUB(G, XG) \
	VEXTRACTF128 $1, G, X1; \
	VADDPD       X1, XG, XG; \
	VUNPCKHPD    XG, XG, X1; \
	VADDSD       X1, XG, XG

// MX_SCALES sets Y3 to the four groups' scales 2^(s-127) from the bytes at
// (DX) and Y4 to the mask of those with byte 255, which it counts in BX.
#define MX_SCALES \
	VPMOVZXBQ (DX), Y3; \
	VPCMPEQQ  nan255<>(SB), Y3, Y4; \
	VPADDQ    bias896<>(SB), Y3, Y3; \
	VPSLLQ    $52, Y3, Y3; \
	VMOVMSKPD Y4, AX; \
	POPCNTL   AX, AX; \
	ADDQ      AX, BX

// MX_FINISH finishes the trees of four group vectors G0–G3, R02 = [a0 b0 |
// a2 b2], R13 = [a1 b1 | a3 b3] with a = (s0+s4)+(s1+s5), b = (s2+s6)+(s3+s7),
// then sub = a+b per group; scales them by Y3 (masked to +0 by Y4) and adds
// the four contributions to ACC in group order. T (XT its low half) is a
// temporary, which may be G0; it clobbers Y0–Y2.
#define MX_FINISH(G0, G1, G2, G3, ACC, T, XT) \
	VPERM2F128   $0x20, G2, G0, Y0; \
	VPERM2F128   $0x31, G2, G0, Y1; \
	VADDPD       Y1, Y0, Y0; \
	VPERM2F128   $0x20, G3, G1, Y1; \
	VPERM2F128   $0x31, G3, G1, Y2; \
	VADDPD       Y2, Y1, Y1; \
	VUNPCKLPD    Y1, Y0, Y2; \
	VUNPCKHPD    Y1, Y0, T; \
	VADDPD       T, Y2, Y2; \
	VMULPD       Y3, Y2, Y2; \
	VANDNPD      Y2, Y4, Y2; \
	VADDSD       X2, ACC, ACC; \
	VUNPCKHPD    X2, X2, XT; \
	VADDSD       XT, ACC, ACC; \
	VEXTRACTF128 $1, Y2, X2; \
	VADDSD       X2, ACC, ACC; \
	VUNPCKHPD    X2, X2, XT; \
	VADDSD       XT, ACC, ACC

// func rowsAVX2asm(dst *float32, rows int, packed, scales *byte, xw *float64, groups int) int
//
// One group of 32 columns: its 16 packed bytes are broadcast to both 128-bit
// halves; the low half yields the even columns' codes, the high half the odd
// columns' (VPSHUFB cannot cross halves). Two table lookups give the two top
// bytes of each value and an unpack joins them into 16-bit patterns (W0:
// columns 0..15, W1: 16..31); one VPSHUFB per step then places four patterns
// at the top of four float64 lanes, which is the exact E2M1 value. RG lanes
// live in A = [0 2 | 1 3] and B = [4 6 | 5 7] (the activations were stored in
// that order), step k multiplies columns 8k..8k+7, so each lane sums its four
// products in ascending column order. The first step multiplies instead of
// adding to +0: the two differ only in the sign of a zero lane, which cannot
// change acc (it starts at +0 and is never -0), so the result is identical.
// T = A+B = [s0+s4, s2+s6 | s1+s5, s3+s7], so the RG tree is
// sub = (T[0]+T[2]) + (T[1]+T[3]).
//
// Four groups at a time share the tail: their trees are finished in one
// vector, multiplied by their four scales (exact), groups with scale byte
// 255 are masked to +0 (adding +0 leaves acc unchanged, as skipping does),
// and acc adds the four contributions in group order.
TEXT ·rowsAVX2asm(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), CX
	MOVQ packed+16(FP), SI
	MOVQ scales+24(FP), DX
	MOVQ xw+32(FP), R8
	MOVQ groups+40(FP), R9
	XORQ BX, BX
	VMOVDQU lotab<>(SB), Y15
	VMOVDQU hitab<>(SB), Y14
	VMOVDQU idxa0<>(SB), Y13
	VMOVDQU idxb0<>(SB), Y12
	VMOVDQU idxa1<>(SB), Y11
	VMOVDQU idxb1<>(SB), Y10

rowloop:
	VXORPD X5, X5, X5
	MOVQ   R8, R11
	MOVQ   R9, R10
	CMPQ   R10, $4
	JLT    single

quad:
	MX_GROUP1(0, 0, Y6)
	MX_GROUP1(16, 256, Y7)
	MX_GROUP1(32, 512, Y8)
	MX_GROUP1(48, 768, Y9)
	MX_SCALES
	MX_FINISH(Y6, Y7, Y8, Y9, X5, Y6, X6)

	ADDQ $64, SI
	ADDQ $4, DX
	ADDQ $1024, R11
	SUBQ $4, R10
	CMPQ R10, $4
	JGE  quad

single:
	TESTQ R10, R10
	JZ    rowdone

singleloop:
	MOVBQZX (DX), AX
	CMPQ    AX, $255
	JEQ     skip
	MX_GROUP1(0, 0, Y6)
	MX_SUB(Y6, X6)
	ADDQ         $896, AX
	SHLQ         $52, AX
	VMOVQ        AX, X1
	VFMADD231SD  X1, X6, X5

next:
	ADDQ $16, SI
	INCQ DX
	ADDQ $256, R11
	DECQ R10
	JNZ  singleloop

rowdone:
	VCVTSD2SS X5, X5, X3
	VMOVSS    X3, (DI)
	ADDQ      $4, DI
	DECQ      CX
	JNZ       rowloop

	VZEROUPPER
	MOVQ BX, ret+48(FP)
	RET

skip:
	INCQ BX
	JMP  next

// rows2AVX2asm is rowsAVX2asm for two activation rows (xw0 in R11, xw1 in
// R13) sharing each decoded weight: a group's decode and its eight VPSHUFB
// placements, about half of the one-row kernel's work per group, serve
// sixteen multiply-adds instead of eight. Each row's products, trees,
// scaling and group order are those of rowsAVX2asm, so each output has the
// bits a one-row call gives it; skipped groups are counted once.
//
// Registers: Y15, Y14 the tables; Y0, Y1 row 0's lanes A, B of the current
// group, Y5, Y6 row 1's; Y2 the placed weights; Y3, Y4 the 16-bit patterns;
// X7, X8 the rows' sums; Y9–Y12 row 0's four group vectors of a quad, row
// 1's wait in the frame (0..127(SP)) until row 0's are finished.

// R2_GROUP decodes the group at GOFF(SI), multiplies it into both rows (its
// activations at XO in each) and leaves row 0's A+B in G0 and row 1's at
// SLOT(SP).
#define R2_PLACE(IDX, XO, A0, A1) \
	VPSHUFB IDX, Y3, Y2; \
	VFMADD231PD XO(R11), Y2, A0; \
	VFMADD231PD XO(R13), Y2, A1

#define R2_PLACE4(IDX, XO, A0, A1) \
	VPSHUFB IDX, Y4, Y2; \
	VFMADD231PD XO(R11), Y2, A0; \
	VFMADD231PD XO(R13), Y2, A1

#define R2_GROUP(GOFF, XO, G0, SLOT) \
	MX_DECODE(GOFF); \
	VPSHUFB        idxa0<>(SB), Y3, Y2; \
	VMULPD         XO+0(R11), Y2, Y0; \
	VMULPD         XO+0(R13), Y2, Y5; \
	VPSHUFB        idxb0<>(SB), Y3, Y2; \
	VMULPD         XO+32(R11), Y2, Y1; \
	VMULPD         XO+32(R13), Y2, Y6; \
	R2_PLACE(idxa1<>(SB), XO+64, Y0, Y5); \
	R2_PLACE(idxb1<>(SB), XO+96, Y1, Y6); \
	R2_PLACE4(idxa0<>(SB), XO+128, Y0, Y5); \
	R2_PLACE4(idxb0<>(SB), XO+160, Y1, Y6); \
	R2_PLACE4(idxa1<>(SB), XO+192, Y0, Y5); \
	R2_PLACE4(idxb1<>(SB), XO+224, Y1, Y6); \
	VADDPD         Y1, Y0, G0; \
	VADDPD         Y6, Y5, Y5; \
	VMOVUPD        Y5, SLOT(SP)

// func rows2AVX2asm(dst0, dst1 *float32, rows int, packed, scales *byte, xw0, xw1 *float64, groups int) int
TEXT ·rows2AVX2asm(SB), NOSPLIT, $128-72
	MOVQ dst0+0(FP), DI
	MOVQ dst1+8(FP), R12
	MOVQ rows+16(FP), CX
	MOVQ packed+24(FP), SI
	MOVQ scales+32(FP), DX
	MOVQ groups+56(FP), R9
	XORQ BX, BX
	VMOVDQU lotab<>(SB), Y15
	VMOVDQU hitab<>(SB), Y14

r2rowloop:
	VXORPD X7, X7, X7
	VXORPD X8, X8, X8
	MOVQ   xw0+40(FP), R11
	MOVQ   xw1+48(FP), R13
	MOVQ   R9, R10
	CMPQ   R10, $4
	JLT    r2single

r2quad:
	R2_GROUP(0, 0, Y9, 0)
	R2_GROUP(16, 256, Y10, 32)
	R2_GROUP(32, 512, Y11, 64)
	R2_GROUP(48, 768, Y12, 96)

	MX_SCALES
	MX_FINISH(Y9, Y10, Y11, Y12, X7, Y5, X5)
	VMOVUPD 0(SP), Y9
	VMOVUPD 32(SP), Y10
	VMOVUPD 64(SP), Y11
	VMOVUPD 96(SP), Y12
	MX_FINISH(Y9, Y10, Y11, Y12, X8, Y5, X5)

	ADDQ $64, SI
	ADDQ $4, DX
	ADDQ $1024, R11
	ADDQ $1024, R13
	SUBQ $4, R10
	CMPQ R10, $4
	JGE  r2quad

r2single:
	TESTQ R10, R10
	JZ    r2rowdone

r2singleloop:
	MOVBQZX (DX), AX
	CMPQ    AX, $255
	JEQ     r2skip
	R2_GROUP(0, 0, Y9, 0)
	VMOVUPD      0(SP), Y10
	MX_SUB(Y9, X9)
	MX_SUB(Y10, X10)
	ADDQ         $896, AX
	SHLQ         $52, AX
	VMOVQ        AX, X1
	VFMADD231SD  X1, X9, X7
	VFMADD231SD  X1, X10, X8

r2next:
	ADDQ $16, SI
	INCQ DX
	ADDQ $256, R11
	ADDQ $256, R13
	DECQ R10
	JNZ  r2singleloop

r2rowdone:
	VCVTSD2SS X7, X7, X3
	VMOVSS    X3, (DI)
	VCVTSD2SS X8, X8, X3
	VMOVSS    X3, (R12)
	ADDQ      $4, DI
	ADDQ      $4, R12
	DECQ      CX
	JNZ       r2rowloop

	VZEROUPPER
	MOVQ BX, ret+64(FP)
	RET

r2skip:
	INCQ BX
	JMP  r2next
