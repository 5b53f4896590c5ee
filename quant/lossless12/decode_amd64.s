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

// L3_PLANE sets Y to bit j of the four plane bytes at OFF(R8), one bit
// (0 or 1) per column byte: broadcast, spread, isolate, clamp to 1.
#define L3_PLANE(OFF, Y) \
	VPBROADCASTD OFF(R8), Y; \
	VPSHUFB      Y15, Y, Y; \
	VPAND        Y14, Y, Y; \
	VPMINUB      Y13, Y, Y

// L3_HALF decodes the 32 columns from column H of the block: indices from
// the planes, exponent base+index, then each code's low byte (exponent bit
// 0 over the mantissa) and high byte (sign over exponent bits 7–1), which
// an unpack interleaves into words. Unpacks keep to their lanes, so two
// lane permutes put the columns back in order. An escape's index is 7 and
// its code is garbage until PATCH rewrites it from the escape area.
#define L3_HALF(H, PATCH, BACK) \
	L3_PLANE(H/8, Y0); \
	L3_PLANE(8+H/8, Y1); \
	L3_PLANE(16+H/8, Y2); \
	VPADDB     Y1, Y1, Y1; \
	VPSLLW     $2, Y2, Y2; \
	VPOR       Y1, Y0, Y0; \
	VPOR       Y2, Y0, Y0; \
	VPCMPEQB   Y11, Y0, Y1; \
	VPMOVMSKB  Y1, AX; \
	VPADDB     Y10, Y0, Y0; \
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
	VMOVDQU    Y6, (2*H+32)(DI); \
	TESTL      AX, AX; \
	JNZ        PATCH; \
BACK:

// L3_PATCH rewrites the code of each escaped column of the half at H (its
// bits in AX, lowest first, the order of the escape area) from its sign-
// and-mantissa byte and the next escape byte.
#define L3_PATCH(H, PATCH, BACK) \
PATCH: \
	BSFL    AX, DX; \
	MOVBLZX (R10)(R11*1), BX; \
	INCQ    R11; \
	MOVBLZX H(SI)(DX*1), R12; \
	MOVL    R12, R13; \
	ANDL    $0x7f, R13; \
	ANDL    $0x80, R12; \
	SHLL    $8, R12; \
	ORL     R12, R13; \
	SHLL    $7, BX; \
	ORL     BX, R13; \
	MOVW    R13, (2*H)(DI)(DX*2); \
	LEAL    -1(AX), BX; \
	ANDL    BX, AX; \
	JNZ     PATCH; \
	JMP     BACK

// func decodeBlocksAVX2(dst, sm, idx, bases, esc *byte, n int) int
//
// Each block prefetches the sign-and-mantissa bytes and the planes eight
// blocks ahead: from memory (a 4096 × 2048 matrix) the decoder ran 1.75–1.84
// G weights/s without and 1.83–2.07 with, against 5–7 in the caches; the
// escape branch, taken in about half the steps, mispredicts, which is the
// suspected cause of the gap (the first layout's decoder, whose escapes were
// rare, ran 2.9 from memory).
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
	L3_HALF(0, patch0, back0)
	L3_HALF(32, patch32, back32)
	ADDQ $64, SI
	ADDQ $128, DI
	ADDQ $24, R8
	INCQ R9
	DECQ CX
	JNZ  block

	VZEROUPPER
	MOVQ R11, ret+48(FP)
	RET

	L3_PATCH(0, patch0, back0)
	L3_PATCH(32, patch32, back32)
