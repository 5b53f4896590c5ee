//go:build amd64 && !purego

#include "textflag.h"

// VPSHUFB indices that copy byte 0 of a broadcast dword to columns 0–7,
// byte 1 to 8–15 (low lane), byte 2 to 16–23 and byte 3 to 24–31 (high
// lane: VPSHUFB stays in its lane, where the dword is broadcast too).
DATA l3shuf<>+0(SB)/8, $0x0000000000000000
DATA l3shuf<>+8(SB)/8, $0x0101010101010101
DATA l3shuf<>+16(SB)/8, $0x0202020202020202
DATA l3shuf<>+24(SB)/8, $0x0303030303030303
GLOBL l3shuf<>(SB), RODATA|NOPTR, $32

// Byte j of every eight holds bit j.
DATA l3bits<>+0(SB)/8, $0x8040201008040201
DATA l3bits<>+8(SB)/8, $0x8040201008040201
DATA l3bits<>+16(SB)/8, $0x8040201008040201
DATA l3bits<>+24(SB)/8, $0x8040201008040201
GLOBL l3bits<>(SB), RODATA|NOPTR, $32

DATA l3ones<>+0(SB)/8, $0x0101010101010101
DATA l3ones<>+8(SB)/8, $0x0101010101010101
DATA l3ones<>+16(SB)/8, $0x0101010101010101
DATA l3ones<>+24(SB)/8, $0x0101010101010101
GLOBL l3ones<>(SB), RODATA|NOPTR, $32

DATA l3seven<>+0(SB)/8, $0x0707070707070707
DATA l3seven<>+8(SB)/8, $0x0707070707070707
DATA l3seven<>+16(SB)/8, $0x0707070707070707
DATA l3seven<>+24(SB)/8, $0x0707070707070707
GLOBL l3seven<>(SB), RODATA|NOPTR, $32

DATA l3low7<>+0(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA l3low7<>+8(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA l3low7<>+16(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA l3low7<>+24(SB)/8, $0x7f7f7f7f7f7f7f7f
GLOBL l3low7<>(SB), RODATA|NOPTR, $32

DATA l3fifteen<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA l3fifteen<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA l3fifteen<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA l3fifteen<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL l3fifteen<>(SB), RODATA|NOPTR, $32

// L3_PLANE sets Y to bit j of the four plane bytes at OFF(R8), one bit
// (0 or 1) per column byte: broadcast, spread, isolate, clamp to 1.
#define L3_PLANE(OFF, Y) \
	VPBROADCASTD OFF(R8), Y; \
	VPSHUFB      Y15, Y, Y; \
	VPAND        Y14, Y, Y; \
	VPMINUB      Y13, Y, Y

// L3_ESCAPES puts the escaped exponents into the exponent bytes X (Y0) of
// 32 columns whose escape mask is M (Y1, 0xFF where the index is 7),
// without a branch: each escaped column's rank among them (a prefix sum of
// the mask within each lane, lane 0's count carried into lane 1, less the
// column's own) picks its byte from the 32 escape bytes at CUR, looked up
// in each 16-byte half and the two blended on bit 4 of the rank. The load
// may read past the row's escape area; the caller guarantees 32 readable
// bytes after it. The cursors come from the planes by scalar arithmetic
// (the block loop), so no load waits on the vector work of the half
// before. Clobbers Y2–Y5.
#define L3_ESCAPES(CUR) \
	VPABSB     Y1, Y2; \
	VPSLLDQ    $1, Y2, Y3; \
	VPADDB     Y3, Y2, Y3; \
	VPSLLDQ    $2, Y3, Y4; \
	VPADDB     Y4, Y3, Y3; \
	VPSLLDQ    $4, Y3, Y4; \
	VPADDB     Y4, Y3, Y3; \
	VPSLLDQ    $8, Y3, Y4; \
	VPADDB     Y4, Y3, Y3; \
	VPSHUFB    l3fifteen<>(SB), Y3, Y4; \
	VPERM2I128 $0x08, Y4, Y4, Y4; \
	VPADDB     Y4, Y3, Y3; \
	VPSUBB     Y2, Y3, Y3; \
	VMOVDQU    (CUR), Y2; \
	VPERM2I128 $0x00, Y2, Y2, Y4; \
	VPERM2I128 $0x11, Y2, Y2, Y5; \
	VPSHUFB    Y3, Y4, Y4; \
	VPSHUFB    Y3, Y5, Y5; \
	VPSLLW     $3, Y3, Y3; \
	VPBLENDVB  Y3, Y5, Y4, Y4; \
	VPBLENDVB  Y1, Y4, Y0, Y0

// L3_CURSORS sets DX and R13 to the escape cursors of the block's two
// halves and moves R11 past the block's escapes: the escapes are the
// columns whose three plane bits are all set.
#define L3_CURSORS \
	MOVQ    (R8), AX; \
	ANDQ    8(R8), AX; \
	ANDQ    16(R8), AX; \
	MOVL    AX, BX; \
	POPCNTL BX, BX; \
	POPCNTQ AX, AX; \
	LEAQ    (R10)(R11*1), DX; \
	LEAQ    (DX)(BX*1), R13; \
	ADDQ    AX, R11

// L3_INDEX sets Y0 to the exponents of the 32 columns from column H of
// the block (the index planes at R8, the base in Y10), escapes included,
// those from CUR on. Clobbers Y1–Y5.
#define L3_INDEX(H, CUR) \
	L3_PLANE(H/8, Y0); \
	L3_PLANE(8+H/8, Y1); \
	L3_PLANE(16+H/8, Y2); \
	VPADDB     Y1, Y1, Y1; \
	VPSLLW     $2, Y2, Y2; \
	VPOR       Y1, Y0, Y0; \
	VPOR       Y2, Y0, Y0; \
	VPCMPEQB   Y11, Y0, Y1; \
	VPADDB     Y10, Y0, Y0; \
	L3_ESCAPES(CUR)

// L3_HALF decodes the 32 columns from column H of the block: their
// exponents (L3_INDEX), then each code's low byte (exponent bit 0 over the
// mantissa) and high byte (sign over exponent bits 7–1), which an unpack
// interleaves into words. Unpacks keep to their lanes, so two lane
// permutes put the columns back in order.
#define L3_HALF(H, CUR) \
	L3_INDEX(H, CUR); \
	VMOVDQU    H(SI), Y3; \
	VPSLLW     $7, Y0, Y4; \
	VPANDN     Y4, Y12, Y4; \
	VPAND      Y12, Y3, Y5; \
	VPOR       Y4, Y5, Y5; \
	VPSRLW     $1, Y0, Y6; \
	VPAND      Y12, Y6, Y6; \
	VPANDN     Y3, Y12, Y7; \
	VPOR       Y6, Y7, Y7; \
	VPUNPCKLBW Y7, Y5, Y8; \
	VPUNPCKHBW Y7, Y5, Y9; \
	VPERM2I128 $0x20, Y9, Y8, Y4; \
	VPERM2I128 $0x31, Y9, Y8, Y6; \
	VMOVDQU    Y4, (2*H)(DI); \
	VMOVDQU    Y6, (2*H+32)(DI)

// func decodeBlocksAVX2(dst, sm, idx, bases, esc *byte, n int) int
//
// The escape area is read 32 bytes at the cursor (L3_ESCAPES): the caller
// guarantees that many readable bytes after it. Each block prefetches the
// sign-and-mantissa bytes and the planes eight blocks ahead.
TEXT ·decodeBlocksAVX2(SB), NOSPLIT, $0-56
	MOVQ    dst+0(FP), DI
	MOVQ    sm+8(FP), SI
	MOVQ    idx+16(FP), R8
	MOVQ    bases+24(FP), R9
	MOVQ    esc+32(FP), R10
	MOVQ    n+40(FP), CX
	XORQ    R11, R11
	VMOVDQU l3shuf<>(SB), Y15
	VMOVDQU l3bits<>(SB), Y14
	VMOVDQU l3ones<>(SB), Y13
	VMOVDQU l3low7<>(SB), Y12
	VMOVDQU l3seven<>(SB), Y11

block:
	PREFETCHT0   512(SI)
	PREFETCHT0   192(R8)
	VPBROADCASTB (R9), Y10
	L3_CURSORS
	L3_HALF(0, DX)
	L3_HALF(32, R13)
	ADDQ $64, SI
	ADDQ $128, DI
	ADDQ $24, R8
	INCQ R9
	DECQ CX
	JNZ  block

	VZEROUPPER
	MOVQ R11, ret+48(FP)
	RET

// 0xffff0000 in every dword: keeps the odd column of each pair of bf16.
DATA l3hi16<>+0(SB)/8, $0xffff0000ffff0000
DATA l3hi16<>+8(SB)/8, $0xffff0000ffff0000
GLOBL l3hi16<>(SB), RODATA|NOPTR, $16

// L3_RUN multiplies the eight bf16 codes of a run of columns in X into the
// lanes: the even columns, widened by a shift, go to AE with the
// activations at OFF(R12), the odd ones, masked, to AO with those at
// OFF+32(R12) (each run of eight activations is stored as columns 0, 2, 4,
// 6, 1, 3, 5, 7). A bf16 times a float32 is exact in float64, so the fused
// multiply-add rounds only the sum. Clobbers Y0, Y1.
#define L3_RUN(X, AE, AO, OFF) \
	VPSLLD      $16, X, X0; \
	VPAND       l3hi16<>(SB), X, X1; \
	VCVTPS2PD   X0, Y0; \
	VCVTPS2PD   X1, Y1; \
	VFMADD231PD OFF(R12), Y0, AE; \
	VFMADD231PD OFF+32(R12), Y1, AO

// L3_DOT multiplies the 32 columns from column H of the block into the
// lanes Y6–Y9: the exponents (L3_INDEX), the codes' low and high bytes as
// L3_HALF builds them, and the unpacks, which leave runs of eight columns
// [0–7 | 16–23] in Y3 and [8–15 | 24–31] in Y4, multiplied in column order
// so that each lane adds its columns in ascending order.
#define L3_DOT(H, CUR) \
	L3_INDEX(H, CUR); \
	VMOVDQU      H(SI), Y1; \
	VPSLLW       $7, Y0, Y2; \
	VPANDN       Y2, Y12, Y2; \
	VPAND        Y12, Y1, Y3; \
	VPOR         Y3, Y2, Y2; \
	VPSRLW       $1, Y0, Y0; \
	VPAND        Y12, Y0, Y0; \
	VPANDN       Y1, Y12, Y1; \
	VPOR         Y0, Y1, Y1; \
	VPUNPCKLBW   Y1, Y2, Y3; \
	VPUNPCKHBW   Y1, Y2, Y4; \
	L3_RUN(X3, Y6, Y7, 8*H); \
	L3_RUN(X4, Y8, Y9, 8*H+64); \
	VEXTRACTI128 $1, Y3, X3; \
	VEXTRACTI128 $1, Y4, X4; \
	L3_RUN(X3, Y6, Y7, 8*H+128); \
	L3_RUN(X4, Y8, Y9, 8*H+192)

// func dotBlocksAVX2(sm, idx, bases, esc *byte, x *float64, n int, acc *[16]float64) int
//
// Adds to the R16 lanes in acc the products of n whole blocks of a row with
// the activations x (float64, each run of eight stored as columns 0, 2, 4,
// 6, 1, 3, 5, 7), decoding each weight in registers, escapes included, and
// returns how many escape bytes it used. acc holds the lanes in the order
// of the registers: 0, 2, 4, 6 | 1, 3, 5, 7 | 8, 10, 12, 14 | 9, 11, 13,
// 15. The escape area is read as decodeBlocksAVX2 reads it.
TEXT ·dotBlocksAVX2(SB), NOSPLIT, $0-64
	MOVQ    sm+0(FP), SI
	MOVQ    idx+8(FP), R8
	MOVQ    bases+16(FP), R9
	MOVQ    esc+24(FP), R10
	MOVQ    x+32(FP), R12
	MOVQ    n+40(FP), CX
	MOVQ    acc+48(FP), DI
	XORQ    R11, R11
	VMOVUPD (DI), Y6
	VMOVUPD 32(DI), Y7
	VMOVUPD 64(DI), Y8
	VMOVUPD 96(DI), Y9
	VMOVDQU l3shuf<>(SB), Y15
	VMOVDQU l3bits<>(SB), Y14
	VMOVDQU l3ones<>(SB), Y13
	VMOVDQU l3low7<>(SB), Y12
	VMOVDQU l3seven<>(SB), Y11

dotblock:
	PREFETCHT0   512(SI)
	PREFETCHT0   192(R8)
	VPBROADCASTB (R9), Y10
	L3_CURSORS
	L3_DOT(0, DX)
	L3_DOT(32, R13)
	ADDQ $64, SI
	ADDQ $24, R8
	INCQ R9
	ADDQ $512, R12
	DECQ CX
	JNZ  dotblock

	VMOVUPD Y6, (DI)
	VMOVUPD Y7, 32(DI)
	VMOVUPD Y8, 64(DI)
	VMOVUPD Y9, 96(DI)
	VZEROUPPER
	MOVQ R11, ret+56(FP)
	RET
