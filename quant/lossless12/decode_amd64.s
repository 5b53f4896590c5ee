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

// func checkBlocksAVX2(idx, bases, esc *byte, n, escLen int) (blocks, ne int)
//
// The leading whole blocks, of n, that pass §6.11.4's block rule, and the
// escape bytes they use: base at most 249; a base above 0 with some index
// 6, a base of 0 with no escape; the block's escapes within the escLen
// bytes of the area, at most 32 of them, and each escape byte below the
// base (32 bytes at the cursor compared at once, the first e of them
// kept). It stops at the first block that fails any of these (or has more
// than 32 escapes), which the caller checks in Go, naming the fault. The
// plane words give the escape mask and the index-6 mask by scalar ANDs,
// so no branch depends on the data but those of a failure. The escape
// area is read 32 bytes at the cursor; the caller guarantees them readable.
TEXT ·checkBlocksAVX2(SB), NOSPLIT, $0-56
	MOVQ idx+0(FP), R8
	MOVQ bases+8(FP), R9
	MOVQ esc+16(FP), R10
	MOVQ escLen+32(FP), R12
	XORQ R11, R11 // escapes used
	XORQ DI, DI   // blocks passed

chkblock:
	CMPQ       DI, n+24(FP)
	JAE        chkdone
	PREFETCHT0 192(R8)
	MOVQ       (R8), AX
	MOVQ       8(R8), BX
	ANDQ       16(R8), BX // p1 & p2
	MOVQ       AX, DX
	ANDQ       BX, DX     // escapes
	NOTQ       AX
	ANDQ       BX, AX     // index 6
	MOVBLZX    (R9)(DI*1), SI
	CMPL       SI, $249
	JA         chkdone
	POPCNTQ    DX, BX     // e
	TESTL      SI, SI
	JNZ        chkabove
	TESTQ      DX, DX
	JNZ        chkdone
	JMP        chknext

chkabove:
	TESTQ        AX, AX
	JZ           chkdone
	CMPQ         BX, $32
	JA           chkdone
	LEAQ         (R11)(BX*1), R13
	CMPQ         R13, R12
	JA           chkdone
	// Bytes at most base−1 where max(byte, base−1) is base−1.
	DECL         SI
	VMOVD        SI, X1
	VPBROADCASTB X1, Y1
	VMOVDQU      (R10)(R11*1), Y0
	VPMAXUB      Y0, Y1, Y0
	VPCMPEQB     Y1, Y0, Y0
	VPMOVMSKB    Y0, AX
	MOVQ         $1, DX
	MOVQ         BX, CX
	SHLQ         CX, DX
	DECQ         DX       // the first e bytes
	ANDQ         DX, AX
	CMPQ         AX, DX
	JNE          chkdone
	MOVQ         R13, R11

chknext:
	ADDQ $24, R8
	INCQ DI
	JMP  chkblock

chkdone:
	VZEROUPPER
	MOVQ DI, blocks+40(FP)
	MOVQ R11, ne+48(FP)
	RET
