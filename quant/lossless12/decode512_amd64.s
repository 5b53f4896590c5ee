//go:build amd64 && !purego

#include "textflag.h"

DATA l5one<>+0(SB)/1, $1
GLOBL l5one<>(SB), RODATA|NOPTR, $1
DATA l5two<>+0(SB)/1, $2
GLOBL l5two<>(SB), RODATA|NOPTR, $1
DATA l5four<>+0(SB)/1, $4
GLOBL l5four<>(SB), RODATA|NOPTR, $1
DATA l5fifteen<>+0(SB)/1, $15
GLOBL l5fifteen<>(SB), RODATA|NOPTR, $1
DATA l5low7<>+0(SB)/1, $0x7f
GLOBL l5low7<>(SB), RODATA|NOPTR, $1
DATA l5top<>+0(SB)/1, $0x80
GLOBL l5top<>(SB), RODATA|NOPTR, $1

// func decodeBlocks512(dst, sm, idx, bases, esc *byte, n int) int
//
// decodeBlocksAVX2 with AVX-512 (F, BW, VBMI), a block of 64 columns a
// step. The three planes are the masks of three merging byte adds to the
// broadcast base, so the exponents cost three instructions; their AND is
// the escape mask. An escaped column's rank among the block's escapes is a
// prefix sum of the mask (four shift-and-add steps within each 128-bit
// lane, the lanes' totals carried by three qword aligns), and one masked
// VPERMB takes the escape bytes at the cursor by rank into the escaped
// columns — no branch, and no VPEXPANDB, which Bochs gets wrong under a
// partial mask (isacheck). The cursor moves by the mask's population
// count, computed from the planes in scalar registers. The escape area is
// read 64 bytes at the cursor; the caller guarantees them readable.
TEXT ·decodeBlocks512(SB), NOSPLIT, $0-56
	MOVQ         dst+0(FP), DI
	MOVQ         sm+8(FP), SI
	MOVQ         idx+16(FP), R8
	MOVQ         bases+24(FP), R9
	MOVQ         esc+32(FP), R10
	MOVQ         n+40(FP), CX
	XORQ         R11, R11
	VPBROADCASTB l5one<>(SB), Z16
	VPBROADCASTB l5two<>(SB), Z17
	VPBROADCASTB l5four<>(SB), Z18
	VPBROADCASTB l5fifteen<>(SB), Z19
	VPBROADCASTB l5low7<>(SB), Z20
	VPBROADCASTB l5top<>(SB), Z21
	VPXORQ       Z22, Z22, Z22

block512:
	PREFETCHT0   512(SI)
	PREFETCHT0   192(R8)
	MOVQ         (R8), AX
	MOVQ         8(R8), BX
	MOVQ         16(R8), DX
	KMOVQ        AX, K1
	KMOVQ        BX, K2
	KMOVQ        DX, K3
	ANDQ         BX, AX
	ANDQ         DX, AX
	KMOVQ        AX, K4
	POPCNTQ      AX, BX

	// Exponents: base + plane0 + 2·plane1 + 4·plane2.
	VPBROADCASTB (R9), Z0
	VPADDB       Z16, Z0, K1, Z0
	VPADDB       Z17, Z0, K2, Z0
	VPADDB       Z18, Z0, K3, Z0

	// Ranks of the escaped columns.
	VPMOVM2B     K4, Z1
	VPABSB       Z1, Z1
	VPSLLDQ      $1, Z1, Z2
	VPADDB       Z2, Z1, Z2
	VPSLLDQ      $2, Z2, Z3
	VPADDB       Z3, Z2, Z2
	VPSLLDQ      $4, Z2, Z3
	VPADDB       Z3, Z2, Z2
	VPSLLDQ      $8, Z2, Z3
	VPADDB       Z3, Z2, Z2
	VPSHUFB      Z19, Z2, Z3
	VALIGNQ      $6, Z22, Z3, Z4
	VALIGNQ      $4, Z22, Z3, Z5
	VPADDB       Z5, Z4, Z4
	VALIGNQ      $2, Z22, Z3, Z5
	VPADDB       Z5, Z4, Z4
	VPADDB       Z4, Z2, Z2
	VPSUBB       Z1, Z2, Z2

	// The escaped exponents, by rank, into the escaped columns.
	VMOVDQU8     (R10)(R11*1), Z5
	VPERMB       Z5, Z2, K4, Z0
	ADDQ         BX, R11

	// Codes: low byte (e & 1) << 7 | m, high byte s | e >> 1.
	VMOVDQU8     (SI), Z6
	VPSLLW       $7, Z0, Z7
	VPANDQ       Z21, Z7, Z7
	VPANDQ       Z20, Z6, Z8
	VPORQ        Z7, Z8, Z8
	VPSRLW       $1, Z0, Z7
	VPANDQ       Z20, Z7, Z7
	VPANDQ       Z21, Z6, Z9
	VPORQ        Z7, Z9, Z9
	VPUNPCKLBW   Z9, Z8, Z10
	VPUNPCKHBW   Z9, Z8, Z11

	// The unpacks keep to 128-bit lanes: lane i of Z10 holds columns
	// 16i … 16i+7, of Z11 16i+8 … 16i+15.
	VEXTRACTI32X4 $0, Z10, (DI)
	VEXTRACTI32X4 $0, Z11, 16(DI)
	VEXTRACTI32X4 $1, Z10, 32(DI)
	VEXTRACTI32X4 $1, Z11, 48(DI)
	VEXTRACTI32X4 $2, Z10, 64(DI)
	VEXTRACTI32X4 $2, Z11, 80(DI)
	VEXTRACTI32X4 $3, Z10, 96(DI)
	VEXTRACTI32X4 $3, Z11, 112(DI)

	ADDQ $64, SI
	ADDQ $128, DI
	ADDQ $24, R8
	INCQ R9
	DECQ CX
	JNZ  block512

	VZEROUPPER
	MOVQ R11, ret+48(FP)
	RET
