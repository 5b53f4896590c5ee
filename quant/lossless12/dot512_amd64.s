//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 fused mat-vec (§6.11.5): one, two or four rows per pass over
// their whole blocks, each block of 64 weights decoded in registers and
// multiplied into the rows' R16 lanes, escapes included.
//
// Per row and block:
//   - VPMOVZXDQ spreads the 32 index bytes over the eight qwords (four
//     bytes, eight columns, each) and VPMULTISHIFTQB moves nibble j of each
//     qword to its byte j: the 64 indices in column order.
//   - e = base + index (the window is base, base+1, …, so no table); the
//     indices 15 form a mask, and the rare block with one fills those
//     bytes from the row's escape area with VPEXPANDB, which takes the
//     area's next bytes in column order, as the format stores them.
//   - VPERMQ puts the exponents, and the sign-and-mantissa bytes as they
//     are loaded, in qword order 0, 4, 1, 5, 2, 6, 3, 7, so the byte
//     unpacks (which work inside 128-bit lanes) give the bf16 codes of
//     columns 0–31 and 32–63 in column order; the high byte of a code is
//     (s & 0x80) | e>>1 and the low byte (e & 1)<<7 | (s & 0x7f), one shift
//     and one bit select each.
//   - Each run of sixteen codes is widened as the bf16 kernel widens them:
//     the even columns by a shift, the odd ones by a mask, then to float64,
//     into the even-lane and odd-lane accumulators, with the activations
//     stored in the same order (0, 2, …, 14, 1, 3, …, 15 per sixteen).
//     Products of a bf16 and a float32 are exact in float64, so the fused
//     multiply-add rounds only the sum, and each lane adds its columns in
//     ascending order.
//
// The activations of a block (eight zmm) are loaded once for all the rows
// of a pass. The lanes are stored unreduced, each row's sixteen as the
// eight even lanes then the eight odd ones; Go adds the short last block,
// the tree and the tail.
//
// The arguments: row 0's first byte (its bases), the offsets in a row of
// the sign-and-mantissa bytes, the index bytes and the escape area, the row
// stride rb, the activations, the number of blocks n > 0, and the outputs.
//
// Registers: SI bases, DI sign-and-mantissa bytes, R8 index bytes (all of
// row 0, block k), BX the row stride, R9 three strides, R10–R13 each row's
// next escape byte, DX the activations, CX the blocks left. Z0–Z7 the
// lanes (row i in Z2i even, Z2i+1 odd), Z8–Z15 the block's activations,
// Z16–Z25 scratch, Z26–Z30 constants.

// Bit offsets in each qword for VPMULTISHIFTQB: 0, 4, …, 28 (nibbles 0–7
// to bytes 0–7) in the even qwords, 32, 36, …, 60 (nibbles 8–15) in the
// odd ones.
DATA l12nibshift<>+0(SB)/8, $0x1c1814100c080400
DATA l12nibshift<>+8(SB)/8, $0x3c3834302c282420
DATA l12nibshift<>+16(SB)/8, $0x1c1814100c080400
DATA l12nibshift<>+24(SB)/8, $0x3c3834302c282420
DATA l12nibshift<>+32(SB)/8, $0x1c1814100c080400
DATA l12nibshift<>+40(SB)/8, $0x3c3834302c282420
DATA l12nibshift<>+48(SB)/8, $0x1c1814100c080400
DATA l12nibshift<>+56(SB)/8, $0x3c3834302c282420
GLOBL l12nibshift<>(SB), RODATA|NOPTR, $64

// Qword order 0, 0, 1, 1, 2, 2, 3, 3: each qword of index bytes (sixteen
// columns) to the two qwords of bytes its nibbles become.
DATA l12spread<>+0(SB)/8, $0
DATA l12spread<>+8(SB)/8, $0
DATA l12spread<>+16(SB)/8, $1
DATA l12spread<>+24(SB)/8, $1
DATA l12spread<>+32(SB)/8, $2
DATA l12spread<>+40(SB)/8, $2
DATA l12spread<>+48(SB)/8, $3
DATA l12spread<>+56(SB)/8, $3
GLOBL l12spread<>(SB), RODATA|NOPTR, $64

// VPERMI2B indices that build the float32 bits of run g (columns 16g …
// 16g+15) from the low bytes (table 0) and high bytes (table 1) of the
// block's codes: dword d holds column 16g+2d (d < 8) or 16g+2(d−8)+1, as
// bytes (zeroed), (zeroed), low, high.
DATA l12run0<>+0(SB)/8, $0x4202000040000000
DATA l12run0<>+8(SB)/8, $0x4606000044040000
DATA l12run0<>+16(SB)/8, $0x4a0a000048080000
DATA l12run0<>+24(SB)/8, $0x4e0e00004c0c0000
DATA l12run0<>+32(SB)/8, $0x4303000041010000
DATA l12run0<>+40(SB)/8, $0x4707000045050000
DATA l12run0<>+48(SB)/8, $0x4b0b000049090000
DATA l12run0<>+56(SB)/8, $0x4f0f00004d0d0000
GLOBL l12run0<>(SB), RODATA|NOPTR, $64

DATA l12run1<>+0(SB)/8, $0x5212000050100000
DATA l12run1<>+8(SB)/8, $0x5616000054140000
DATA l12run1<>+16(SB)/8, $0x5a1a000058180000
DATA l12run1<>+24(SB)/8, $0x5e1e00005c1c0000
DATA l12run1<>+32(SB)/8, $0x5313000051110000
DATA l12run1<>+40(SB)/8, $0x5717000055150000
DATA l12run1<>+48(SB)/8, $0x5b1b000059190000
DATA l12run1<>+56(SB)/8, $0x5f1f00005d1d0000
GLOBL l12run1<>(SB), RODATA|NOPTR, $64

DATA l12run2<>+0(SB)/8, $0x6222000060200000
DATA l12run2<>+8(SB)/8, $0x6626000064240000
DATA l12run2<>+16(SB)/8, $0x6a2a000068280000
DATA l12run2<>+24(SB)/8, $0x6e2e00006c2c0000
DATA l12run2<>+32(SB)/8, $0x6323000061210000
DATA l12run2<>+40(SB)/8, $0x6727000065250000
DATA l12run2<>+48(SB)/8, $0x6b2b000069290000
DATA l12run2<>+56(SB)/8, $0x6f2f00006d2d0000
GLOBL l12run2<>(SB), RODATA|NOPTR, $64

DATA l12run3<>+0(SB)/8, $0x7232000070300000
DATA l12run3<>+8(SB)/8, $0x7636000074340000
DATA l12run3<>+16(SB)/8, $0x7a3a000078380000
DATA l12run3<>+24(SB)/8, $0x7e3e00007c3c0000
DATA l12run3<>+32(SB)/8, $0x7333000071310000
DATA l12run3<>+40(SB)/8, $0x7737000075350000
DATA l12run3<>+48(SB)/8, $0x7b3b000079390000
DATA l12run3<>+56(SB)/8, $0x7f3f00007d3d0000
GLOBL l12run3<>(SB), RODATA|NOPTR, $64

#define CONSTS512 \
	VMOVDQU64 l12nibshift<>(SB), Z26; \
	VMOVDQU64 l12spread<>(SB), Z24; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z27; \
	MOVL $0x80808080, AX; \
	VPBROADCASTD AX, Z29; \
	VMOVDQU64 l12run0<>(SB), Z28; \
	VMOVDQU64 l12run1<>(SB), Z30; \
	VMOVDQU64 l12run2<>(SB), Z31; \
	VMOVDQU64 l12run3<>(SB), Z25; \
	MOVQ $0xcccccccccccccccc, AX; \
	KMOVQ AX, K2

// The block's activations: run g (columns 16g … 16g+15) in Z(8+2g), even
// columns, and Z(9+2g), odd ones.
#define LOADX \
	VMOVUPD 0(DX), Z8; \
	VMOVUPD 64(DX), Z9; \
	VMOVUPD 128(DX), Z10; \
	VMOVUPD 192(DX), Z11; \
	VMOVUPD 256(DX), Z12; \
	VMOVUPD 320(DX), Z13; \
	VMOVUPD 384(DX), Z14; \
	VMOVUPD 448(DX), Z15

// EXPS leaves in Z16 the exponents of a block in column order, the
// escaped ones still base+15, and in K1 the escaped columns.
#define EXPS(NIB, BASE) \
	VMOVDQU64 NIB, Y16; \
	VPERMQ Z16, Z24, Z16; \
	VPMULTISHIFTQB Z16, Z26, Z16; \
	VPANDQ Z27, Z16, Z16; \
	VPCMPEQB Z27, Z16, K1; \
	VPBROADCASTB BASE, Z17; \
	VPADDB Z17, Z16, Z16; \
	KORTESTQ K1, K1

// ESCAPE fills the escaped exponents from the row's area at ESC and moves
// ESC past them.
#define ESCAPE(ESC) \
	VPEXPANDB (ESC), K1, Z16; \
	KMOVQ K1, AX; \
	POPCNTQ AX, AX; \
	ADDQ AX, ESC

// RUN builds the float32 bits of the sixteen weights of a run from the
// low bytes in Z16 and the high bytes in Z18 with the run's index IDX
// (the even columns in the low half, the odd ones in the high half),
// widens them to float64 and multiplies them into the lanes AE (even
// columns) and AO (odd ones) with the activations XE, XO.
#define RUN(IDX, XE, XO, AE, AO) \
	VMOVDQA64 IDX, Z19; \
	VPERMI2B.Z Z18, Z16, K2, Z19; \
	VCVTPS2PD Y19, Z20; \
	VEXTRACTI64X4 $1, Z19, Y19; \
	VCVTPS2PD Y19, Z19; \
	VFMADD231PD XE, Z20, AE; \
	VFMADD231PD XO, Z19, AO

// CODES rebuilds the bytes of the block's 64 codes from the exponents in
// Z16 and the sign-and-mantissa bytes at SM, the low bytes (e & 1)<<7 |
// (s & 0x7f) in Z16 and the high bytes (s & 0x80) | e>>1 in Z18, and
// multiplies them into AE, AO.
#define CODES(SM, AE, AO) \
	VMOVDQU64 SM, Z17; \
	VPSRLW $1, Z16, Z18; \
	VPTERNLOGD $0xD8, Z29, Z17, Z18; \
	VPSLLW $7, Z16, Z16; \
	VPTERNLOGD $0xE4, Z29, Z17, Z16; \
	RUN(Z28, Z8, Z9, AE, AO); \
	RUN(Z30, Z10, Z11, AE, AO); \
	RUN(Z31, Z12, Z13, AE, AO); \
	RUN(Z25, Z14, Z15, AE, AO)

#define NEXT \
	ADDQ $1, SI; \
	ADDQ $64, DI; \
	ADDQ $32, R8; \
	ADDQ $512, DX; \
	DECQ CX

// STORE writes a row's lanes AE, AO to acc at OE, OO and its escape count
// (ESC, moved back to row 0, less row 0's escape area; CX scratch) to ne at ON.
#define STORE(OE, OO, ON, AE, AO, ESC) \
	VMOVUPD AE, OE(AX); \
	VMOVUPD AO, OO(AX); \
	MOVQ ESC, CX; \
	SUBQ row+0(FP), CX; \
	SUBQ esc+24(FP), CX; \
	MOVQ CX, ON(DI)

#define ARGS \
	MOVQ row+0(FP), SI; \
	MOVQ sm+8(FP), DI; \
	ADDQ SI, DI; \
	MOVQ nib+16(FP), R8; \
	ADDQ SI, R8; \
	MOVQ esc+24(FP), R10; \
	ADDQ SI, R10; \
	MOVQ rb+32(FP), BX; \
	MOVQ x+40(FP), DX; \
	MOVQ n+48(FP), CX; \
	LEAQ (BX)(BX*2), R9; \
	LEAQ (R10)(BX*1), R11; \
	LEAQ (R10)(BX*2), R12; \
	LEAQ (R10)(R9*1), R13

// func dotRows4x512(row *byte, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int)
TEXT ·dotRows4x512(SB), NOSPLIT, $0-72
	ARGS
	CONSTS512
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7

	LEAQ (DI)(BX*4), R14
	LEAQ (R8)(BX*4), R15

r4block:
	PREFETCHT0 (R14)
	PREFETCHT0 (R14)(BX*1)
	PREFETCHT0 (R14)(BX*2)
	PREFETCHT0 (R14)(R9*1)
	PREFETCHT0 (R15)
	PREFETCHT0 (R15)(BX*1)
	PREFETCHT0 (R15)(BX*2)
	PREFETCHT0 (R15)(R9*1)
	LOADX
	EXPS((R8), (SI))
	JNZ r4esc0
r4back0:
	CODES((DI), Z0, Z1)
	EXPS((R8)(BX*1), (SI)(BX*1))
	JNZ r4esc1
r4back1:
	CODES((DI)(BX*1), Z2, Z3)
	EXPS((R8)(BX*2), (SI)(BX*2))
	JNZ r4esc2
r4back2:
	CODES((DI)(BX*2), Z4, Z5)
	EXPS((R8)(R9*1), (SI)(R9*1))
	JNZ r4esc3
r4back3:
	CODES((DI)(R9*1), Z6, Z7)
	ADDQ $64, R14
	ADDQ $32, R15
	NEXT
	JNZ r4block

	MOVQ acc+56(FP), AX
	MOVQ ne+64(FP), DI
	SUBQ BX, R11
	SUBQ BX, R12
	SUBQ BX, R12
	SUBQ R9, R13
	STORE(0, 64, 0, Z0, Z1, R10)
	STORE(128, 192, 8, Z2, Z3, R11)
	STORE(256, 320, 16, Z4, Z5, R12)
	STORE(384, 448, 24, Z6, Z7, R13)
	VZEROUPPER
	RET

r4esc0:
	ESCAPE(R10)
	JMP r4back0
r4esc1:
	ESCAPE(R11)
	JMP r4back1
r4esc2:
	ESCAPE(R12)
	JMP r4back2
r4esc3:
	ESCAPE(R13)
	JMP r4back3

// func dotRows2x512(row *byte, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int)
TEXT ·dotRows2x512(SB), NOSPLIT, $0-72
	ARGS
	CONSTS512
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3

r2block:
	LOADX
	EXPS((R8), (SI))
	JNZ r2esc0
r2back0:
	CODES((DI), Z0, Z1)
	EXPS((R8)(BX*1), (SI)(BX*1))
	JNZ r2esc1
r2back1:
	CODES((DI)(BX*1), Z2, Z3)
	NEXT
	JNZ r2block

	MOVQ acc+56(FP), AX
	MOVQ ne+64(FP), DI
	SUBQ BX, R11
	STORE(0, 64, 0, Z0, Z1, R10)
	STORE(128, 192, 8, Z2, Z3, R11)
	VZEROUPPER
	RET

r2esc0:
	ESCAPE(R10)
	JMP r2back0
r2esc1:
	ESCAPE(R11)
	JMP r2back1

// func dotRows1x512(row *byte, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int)
TEXT ·dotRows1x512(SB), NOSPLIT, $0-72
	ARGS
	CONSTS512
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1

r1block:
	LOADX
	EXPS((R8), (SI))
	JNZ r1esc0
r1back0:
	CODES((DI), Z0, Z1)
	NEXT
	JNZ r1block

	MOVQ acc+56(FP), AX
	MOVQ ne+64(FP), DI
	STORE(0, 64, 0, Z0, Z1, R10)
	VZEROUPPER
	RET

r1esc0:
	ESCAPE(R10)
	JMP r1back0
