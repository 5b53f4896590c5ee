//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 fused mat-vec (§6.11.5): one, two or four rows a pass over
// their whole blocks, each block of 64 weights decoded in registers and
// multiplied into the rows' R16 lanes, escapes included.
//
// The weights are not widened through float32 but built directly as
// float64 bits in a scaled domain: for a bf16 code s<<15 | e<<7 | m, the
// float64 with sign s, exponent field e and mantissa m<<45 is the weight
// times 2^−896 exactly, for every finite code (zeros, subnormals, which
// become float64 subnormals, and normal weights alike); only e = 255 is
// not, and a block whose window reaches it (base 241) ends the run, for Go
// to add. The caller multiplies the activations by 2^768 (exact), so each
// product, exact in float64, is the true one times 2^−128, and the lanes
// accumulate in that domain: binary rounding does not see a power-of-two
// scale while every value is a normal float64, which holds here (a nonzero
// product, and so a nonzero sum of them, is at least 2^−282 in magnitude,
// and a sum of 2^31 products at most 2^288; infinities and NaNs pass a
// power of two unchanged), so the caller's multiplying the lanes by 2^128
// gives the bits of the bf16 kernel's lanes. decodeRow512, at the end,
// decodes rows to bf16 with the same exponent steps.
//
// Per row and block:
//   - VPMOVZXBW widens the 32 index bytes to words, each holding the
//     indices of two columns; a shift by four and a bit select move each
//     high nibble to its word's high byte: the 64 indices in column order,
//     with one cross-lane shuffle (there are few to spare: the permutes
//     that build the weights are what bounds the kernel).
//   - e = base + index (the window is base, base+1, …, so no table); the
//     indices 15 form a mask, and the rare block with one fills those
//     bytes from the row's escape area with VPEXPANDB, which takes the
//     area's next bytes in column order, as the format stores them.
//   - Three bytes per column hold the float64's nonzero bytes: byte 7
//     (s & 0x80) | e>>4, byte 6 (e & 15)<<4 | m>>3, byte 5 (m & 7)<<5 (bit
//     moves within a byte are VGF2P8AFFINEQB; a shift and a bit select
//     merge two sources).
//   - For each eight columns of one run of sixteen (its even columns or
//     its odd ones) a two-table VPERMI2B, zeroing the other bytes, builds
//     the eight float64 weights, which one fused multiply-add adds to the
//     row's even-lane or odd-lane accumulator with the activations stored
//     in the same order (per sixteen: columns 0, 2, …, 14, then 1, 3, …,
//     15, as the bf16 kernel stores them), so each lane adds its columns in
//     ascending order.
//
// The activations of a block (eight zmm) are loaded once for all the rows
// of a pass. The four-row pass prefetches the same place in the next four
// rows, where the hardware prefetcher does not follow, and the
// sign-and-mantissa bytes eight blocks ahead in its own rows.
//
// The lanes are loaded from acc (each row's sixteen as the eight even
// lanes then the eight odd ones) and the escape cursors from ne. A pass
// that ends early stores them back, so that Go can add the block and
// resume; one that takes the rows' last whole block finishes the rows,
// when they have no other columns, and stores their float32 results at
// out (out nil: it stores the lanes).
//
// The arguments: row 0's first byte; the offsets in a row of the block's
// window base, its sign-and-mantissa bytes, its index bytes and of the
// escape area; the row stride rb; the activations of the block; the
// number of blocks n > 0; acc and ne; out. The result is the number of
// blocks taken.
//
// Registers: SI bases, DI sign-and-mantissa bytes, R8 index bytes (all of
// row 0, block k), BX the row stride, R9 three strides, R10–R13 each row's
// next escape byte, R14 and R15 the prefetch pointers, DX the
// activations, CX the blocks left, AX scratch. Z0–Z7 the lanes
// (row i in Z2i even, Z2i+1 odd), Z8–Z15 the block's activations,
// Z16–Z23 scratch, Z27–Z31 constants.

// VGF2P8AFFINEQB matrices (row i of the matrix, the byte 7−i of the
// qword, selects the input bits of output bit i): l12gf5 moves bits 0–2
// to 5–7, l12gf7 bits 4–7 to 0–3; the other output bits are 0.
DATA l12gf5<>+0(SB)/8, $0x0000000000010204
GLOBL l12gf5<>(SB), RODATA|NOPTR, $8
DATA l12gf7<>+0(SB)/8, $0x1020408000000000
GLOBL l12gf7<>(SB), RODATA|NOPTR, $8

// VPERMI2B indices building the float64 weights of columns 16g+2j (l12tGe)
// or 16g+2j+1 (l12tGo), j = 0 … 7, as qword j: bytes 5, 6 and 7 from the
// tables (byte 5 from the second, at 64 + column; bytes 6 and 7 from the
// first, which holds bytes 6 of the run's 32 columns then bytes 7), the
// others zeroed by the mask.
DATA l12t0e<>+0(SB)/8, $0x2000400000000000
DATA l12t0e<>+8(SB)/8, $0x2202420000000000
DATA l12t0e<>+16(SB)/8, $0x2404440000000000
DATA l12t0e<>+24(SB)/8, $0x2606460000000000
DATA l12t0e<>+32(SB)/8, $0x2808480000000000
DATA l12t0e<>+40(SB)/8, $0x2a0a4a0000000000
DATA l12t0e<>+48(SB)/8, $0x2c0c4c0000000000
DATA l12t0e<>+56(SB)/8, $0x2e0e4e0000000000
GLOBL l12t0e<>(SB), RODATA|NOPTR, $64

DATA l12t0o<>+0(SB)/8, $0x2101410000000000
DATA l12t0o<>+8(SB)/8, $0x2303430000000000
DATA l12t0o<>+16(SB)/8, $0x2505450000000000
DATA l12t0o<>+24(SB)/8, $0x2707470000000000
DATA l12t0o<>+32(SB)/8, $0x2909490000000000
DATA l12t0o<>+40(SB)/8, $0x2b0b4b0000000000
DATA l12t0o<>+48(SB)/8, $0x2d0d4d0000000000
DATA l12t0o<>+56(SB)/8, $0x2f0f4f0000000000
GLOBL l12t0o<>(SB), RODATA|NOPTR, $64

DATA l12t1e<>+0(SB)/8, $0x3010500000000000
DATA l12t1e<>+8(SB)/8, $0x3212520000000000
DATA l12t1e<>+16(SB)/8, $0x3414540000000000
DATA l12t1e<>+24(SB)/8, $0x3616560000000000
DATA l12t1e<>+32(SB)/8, $0x3818580000000000
DATA l12t1e<>+40(SB)/8, $0x3a1a5a0000000000
DATA l12t1e<>+48(SB)/8, $0x3c1c5c0000000000
DATA l12t1e<>+56(SB)/8, $0x3e1e5e0000000000
GLOBL l12t1e<>(SB), RODATA|NOPTR, $64

DATA l12t1o<>+0(SB)/8, $0x3111510000000000
DATA l12t1o<>+8(SB)/8, $0x3313530000000000
DATA l12t1o<>+16(SB)/8, $0x3515550000000000
DATA l12t1o<>+24(SB)/8, $0x3717570000000000
DATA l12t1o<>+32(SB)/8, $0x3919590000000000
DATA l12t1o<>+40(SB)/8, $0x3b1b5b0000000000
DATA l12t1o<>+48(SB)/8, $0x3d1d5d0000000000
DATA l12t1o<>+56(SB)/8, $0x3f1f5f0000000000
GLOBL l12t1o<>(SB), RODATA|NOPTR, $64

DATA l12t2e<>+0(SB)/8, $0x2000600000000000
DATA l12t2e<>+8(SB)/8, $0x2202620000000000
DATA l12t2e<>+16(SB)/8, $0x2404640000000000
DATA l12t2e<>+24(SB)/8, $0x2606660000000000
DATA l12t2e<>+32(SB)/8, $0x2808680000000000
DATA l12t2e<>+40(SB)/8, $0x2a0a6a0000000000
DATA l12t2e<>+48(SB)/8, $0x2c0c6c0000000000
DATA l12t2e<>+56(SB)/8, $0x2e0e6e0000000000
GLOBL l12t2e<>(SB), RODATA|NOPTR, $64

DATA l12t2o<>+0(SB)/8, $0x2101610000000000
DATA l12t2o<>+8(SB)/8, $0x2303630000000000
DATA l12t2o<>+16(SB)/8, $0x2505650000000000
DATA l12t2o<>+24(SB)/8, $0x2707670000000000
DATA l12t2o<>+32(SB)/8, $0x2909690000000000
DATA l12t2o<>+40(SB)/8, $0x2b0b6b0000000000
DATA l12t2o<>+48(SB)/8, $0x2d0d6d0000000000
DATA l12t2o<>+56(SB)/8, $0x2f0f6f0000000000
GLOBL l12t2o<>(SB), RODATA|NOPTR, $64

DATA l12t3e<>+0(SB)/8, $0x3010700000000000
DATA l12t3e<>+8(SB)/8, $0x3212720000000000
DATA l12t3e<>+16(SB)/8, $0x3414740000000000
DATA l12t3e<>+24(SB)/8, $0x3616760000000000
DATA l12t3e<>+32(SB)/8, $0x3818780000000000
DATA l12t3e<>+40(SB)/8, $0x3a1a7a0000000000
DATA l12t3e<>+48(SB)/8, $0x3c1c7c0000000000
DATA l12t3e<>+56(SB)/8, $0x3e1e7e0000000000
GLOBL l12t3e<>(SB), RODATA|NOPTR, $64

DATA l12t3o<>+0(SB)/8, $0x3111710000000000
DATA l12t3o<>+8(SB)/8, $0x3313730000000000
DATA l12t3o<>+16(SB)/8, $0x3515750000000000
DATA l12t3o<>+24(SB)/8, $0x3717770000000000
DATA l12t3o<>+32(SB)/8, $0x3919790000000000
DATA l12t3o<>+40(SB)/8, $0x3b1b7b0000000000
DATA l12t3o<>+48(SB)/8, $0x3d1d7d0000000000
DATA l12t3o<>+56(SB)/8, $0x3f1f7f0000000000
GLOBL l12t3o<>(SB), RODATA|NOPTR, $64

#define CONSTS512 \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z27; \
	MOVL $0x80808080, AX; \
	VPBROADCASTD AX, Z29; \
	MOVL $0xf0f0f0f0, AX; \
	VPBROADCASTD AX, Z28; \
	VPBROADCASTQ l12gf5<>(SB), Z30; \
	VPBROADCASTQ l12gf7<>(SB), Z31; \
	MOVQ $0xe0e0e0e0e0e0e0e0, AX; \
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
	VPMOVZXBW NIB, Z16; \
	VPSLLW $4, Z16, Z17; \
	VPTERNLOGD $0xA8, Z27, Z17, Z16; \
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

// W8 builds eight float64 weights with the index at IDX from the tables
// T1, T2 and multiplies them into ACC with the activations XX.
#define W8(IDX, T1, T2, XX, ACC) \
	VMOVDQU64 IDX, Z19; \
	VPERMI2B.Z T2, T1, K2, Z19; \
	VFMADD231PD XX, Z19, ACC

// WEIGHTS builds the bytes of the block's float64 weights from the
// exponents in Z16 and the sign-and-mantissa bytes at SM — byte 5 in Z18,
// bytes 6 and 7 of columns 0–31 in Z21 and of columns 32–63 in Z23 — and
// multiplies them into AE, AO.
#define WEIGHTS(SM, AE, AO) \
	VMOVDQU64 SM, Z17; \
	VGF2P8AFFINEQB $0, Z30, Z17, Z18; \
	VPSLLW $4, Z16, Z20; \
	VPSRLW $3, Z17, Z21; \
	VPTERNLOGD $0xE4, Z28, Z21, Z20; \
	VGF2P8AFFINEQB $0, Z31, Z16, Z22; \
	VPTERNLOGD $0xD8, Z29, Z17, Z22; \
	VSHUFI64X2 $0x44, Z22, Z20, Z21; \
	VSHUFI64X2 $0xee, Z22, Z20, Z23; \
	W8(l12t0e<>(SB), Z21, Z18, Z8, AE); \
	W8(l12t0o<>(SB), Z21, Z18, Z9, AO); \
	W8(l12t1e<>(SB), Z21, Z18, Z10, AE); \
	W8(l12t1o<>(SB), Z21, Z18, Z11, AO); \
	W8(l12t2e<>(SB), Z23, Z18, Z12, AE); \
	W8(l12t2o<>(SB), Z23, Z18, Z13, AO); \
	W8(l12t3e<>(SB), Z23, Z18, Z14, AE); \
	W8(l12t3o<>(SB), Z23, Z18, Z15, AO)

#define NEXT \
	ADDQ $1, SI; \
	ADDQ $64, DI; \
	ADDQ $32, R8; \
	ADDQ $512, DX; \
	DECQ CX

// START loads the arguments: the pointers of row 0, block k, the row
// stride, the activations, the count, and row 0's escape cursor.
#define START \
	MOVQ row+0(FP), SI; \
	MOVQ sm+16(FP), DI; \
	ADDQ SI, DI; \
	MOVQ nib+24(FP), R8; \
	ADDQ SI, R8; \
	MOVQ esc+32(FP), R10; \
	ADDQ SI, R10; \
	ADDQ base+8(FP), SI; \
	MOVQ rb+40(FP), BX; \
	MOVQ x+48(FP), DX; \
	MOVQ n+56(FP), CX; \
	LEAQ (BX)(BX*2), R9; \
	MOVQ ne+72(FP), R14; \
	CONSTS512

// CURSOR sets ESC to row i's escape cursor: R10 (row 0's area) plus OFF
// (the row's offset from row 0) plus its count so far at ON(R14).
#define CURSOR(ESC, OFF, ON) \
	LEAQ OFF, ESC; \
	ADDQ ON(R14), ESC

// LOADACC / STOREACC move a row's lanes between AE, AO and acc at OE, OO
// (acc's address in R15).
#define LOADACC(OE, OO, AE, AO) \
	VMOVUPD OE(R15), AE; \
	VMOVUPD OO(R15), AO

#define STOREACC(OE, OO, AE, AO) \
	VMOVUPD AE, OE(R15); \
	VMOVUPD AO, OO(R15)

// BASEOK jumps to OUT unless the window base at BASE is at most 240.
#define BASEOK(BASE, OUT) \
	CMPB BASE, $240; \
	JHI OUT

// FINISH combines a row's lanes ZE (even), ZO (odd) with the R16 tree
// (§5.2: c_l = (a_l + a_l+4) + (a_l+8 + a_l+12), then (c0 + c1) + (c2 +
// c3)), scales the sum back by 2^128 (exact: every value is a normal
// float64), rounds it to float32 and stores it at OFF(DX). Z8–Z11 scratch.
#define FINISH(ZE, YE, XE, ZO, YO, XO, OFF) \
	VEXTRACTF64X4 $1, ZE, Y8; \
	VEXTRACTF128 $1, YE, X9; \
	VADDPD X9, XE, X9; \
	VEXTRACTF128 $1, Y8, X10; \
	VADDPD X10, X8, X10; \
	VADDPD X10, X9, X9; \
	VEXTRACTF64X4 $1, ZO, Y8; \
	VEXTRACTF128 $1, YO, X10; \
	VADDPD X10, XO, X10; \
	VEXTRACTF128 $1, Y8, X11; \
	VADDPD X11, X8, X11; \
	VADDPD X11, X10, X10; \
	VADDPD X10, X9, X9; \
	VHADDPD X9, X9, X9; \
	VMULSD l12two128<>(SB), X9, X9; \
	VCVTSD2SS X9, X9, X9; \
	VMOVSS X9, OFF(DX)

// DONE jumps to ACC unless the pass took every block (CX = 0) and out is
// not nil, leaving out in DX.
#define DONE(ACC) \
	MOVQ out+80(FP), DX; \
	TESTQ CX, CX; \
	JNZ ACC; \
	TESTQ DX, DX; \
	JZ ACC

// 2^128, which undoes the lanes' scale.
DATA l12two128<>+0(SB)/8, $0x47f0000000000000
GLOBL l12two128<>(SB), RODATA|NOPTR, $8

// ESCAPES4 are BLOCK4's escape paths, one per row: each takes the row's escaped exponents from
// its cursor (R10 … R13, ESCAPE) and returns into the block.
#define ESCAPES4 \
blkesc0: \
	ESCAPE(R10); \
	JMP blkback0; \
blkesc1: \
	ESCAPE(R11); \
	JMP blkback1; \
blkesc2: \
	ESCAPE(R12); \
	JMP blkback2; \
blkesc3: \
	ESCAPE(R13); \
	JMP blkback3

// BLOCK4 runs one block of the four rows at SI, DI, R8 (strides BX, R9 = 3·BX): it leaves for
// OUT when a row's window base is one the kernel hands back (BASEOK), prefetches, decodes each
// row's weights into its accumulator pair (Z0/Z1 … Z6/Z7), and advances. A row with an escape
// jumps to blkesc0 … blkesc3, which return to blkback0 … blkback3: labels of the function that
// expands it (labels are function-scoped), as dotRows4x512 and dotPasses4x512 both do.
#define BLOCK4(OUT) \
	BASEOK((SI), OUT); \
	BASEOK((SI)(BX*1), OUT); \
	BASEOK((SI)(BX*2), OUT); \
	BASEOK((SI)(R9*1), OUT); \
	PREFETCHT0 (R14); \
	PREFETCHT0 (R14)(BX*1); \
	PREFETCHT0 (R14)(BX*2); \
	PREFETCHT0 (R14)(R9*1); \
	PREFETCHT0 (R15); \
	PREFETCHT0 (R15)(BX*1); \
	PREFETCHT0 (R15)(BX*2); \
	PREFETCHT0 (R15)(R9*1); \
	PREFETCHT0 512(DI); \
	PREFETCHT0 512(DI)(BX*1); \
	PREFETCHT0 512(DI)(BX*2); \
	PREFETCHT0 512(DI)(R9*1); \
	LOADX; \
	EXPS((R8), (SI)); \
	JNZ blkesc0; \
blkback0: \
	WEIGHTS((DI), Z0, Z1); \
	EXPS((R8)(BX*1), (SI)(BX*1)); \
	JNZ blkesc1; \
blkback1: \
	WEIGHTS((DI)(BX*1), Z2, Z3); \
	EXPS((R8)(BX*2), (SI)(BX*2)); \
	JNZ blkesc2; \
blkback2: \
	WEIGHTS((DI)(BX*2), Z4, Z5); \
	EXPS((R8)(R9*1), (SI)(R9*1)); \
	JNZ blkesc3; \
blkback3: \
	WEIGHTS((DI)(R9*1), Z6, Z7); \
	ADDQ $64, R14; \
	ADDQ $32, R15; \
	NEXT

// func dotRows4x512(row *byte, base, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int, out *float32) int
TEXT ·dotRows4x512(SB), NOSPLIT, $0-96
	START
	CURSOR(R13, (R10)(R9*1), 24)
	CURSOR(R12, (R10)(BX*2), 16)
	CURSOR(R11, (R10)(BX*1), 8)
	ADDQ 0(R14), R10
	MOVQ acc+64(FP), R15
	LOADACC(0, 64, Z0, Z1)
	LOADACC(128, 192, Z2, Z3)
	LOADACC(256, 320, Z4, Z5)
	LOADACC(384, 448, Z6, Z7)
	LEAQ (DI)(BX*4), R14
	LEAQ (R8)(BX*4), R15

r4block:
	BLOCK4(r4out)
	JNZ r4block

r4out:
	MOVQ n+56(FP), AX
	SUBQ CX, AX
	MOVQ AX, ret+88(FP)
	DONE(r4acc)
	FINISH(Z0, Y0, X0, Z1, Y1, X1, 0)
	FINISH(Z2, Y2, X2, Z3, Y3, X3, 4)
	FINISH(Z4, Y4, X4, Z5, Y5, X5, 8)
	FINISH(Z6, Y6, X6, Z7, Y7, X7, 12)
	VZEROUPPER
	RET

r4acc:
	MOVQ acc+64(FP), R15
	STOREACC(0, 64, Z0, Z1)
	STOREACC(128, 192, Z2, Z3)
	STOREACC(256, 320, Z4, Z5)
	STOREACC(384, 448, Z6, Z7)
	MOVQ ne+72(FP), R14
	MOVQ esc+32(FP), AX
	ADDQ row+0(FP), AX
	SUBQ AX, R10
	MOVQ R10, 0(R14)
	SUBQ BX, R11
	SUBQ AX, R11
	MOVQ R11, 8(R14)
	SUBQ BX, R12
	SUBQ BX, R12
	SUBQ AX, R12
	MOVQ R12, 16(R14)
	SUBQ R9, R13
	SUBQ AX, R13
	MOVQ R13, 24(R14)
	VZEROUPPER
	RET

	ESCAPES4

// func dotPasses4x512(row *byte, sm, nib, esc, rb int, x *float64, n, passes int, out *float32) int
//
// Runs passes passes of four rows of n whole blocks each (rows with no
// other columns), from zero lanes, the first at row, each 4·rb bytes after
// the last, and stores each pass's four float32 results at out, out+16, …:
// one call for a whole row range, so that narrow rows (a few blocks) do not
// pay a call, the constants, the lanes' loads and stores and Go's setup per
// four rows. A pass meeting a window base above 240 is dropped half done
// (its rows' results not stored) and the call returns the passes left,
// that one included, for Go to run with dotRows4x512, which hands the
// block back; otherwise it returns 0. The same registers as dotRows4x512,
// with base at the row's start (block 0).
TEXT ·dotPasses4x512(SB), NOSPLIT, $0-80
	MOVQ row+0(FP), SI
	MOVQ rb+32(FP), BX
	LEAQ (BX)(BX*2), R9
	CONSTS512

p4pass:
	MOVQ esc+24(FP), R10
	ADDQ SI, R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R10)(BX*2), R12
	LEAQ (R10)(R9*1), R13
	MOVQ sm+8(FP), DI
	ADDQ SI, DI
	MOVQ nib+16(FP), R8
	ADDQ SI, R8
	MOVQ x+40(FP), DX
	MOVQ n+48(FP), CX
	LEAQ (DI)(BX*4), R14
	LEAQ (R8)(BX*4), R15
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7

p4block:
	BLOCK4(p4ret)
	JNZ p4block

	MOVQ out+64(FP), DX
	FINISH(Z0, Y0, X0, Z1, Y1, X1, 0)
	FINISH(Z2, Y2, X2, Z3, Y3, X3, 4)
	FINISH(Z4, Y4, X4, Z5, Y5, X5, 8)
	FINISH(Z6, Y6, X6, Z7, Y7, X7, 12)
	ADDQ $16, out+64(FP)
	// SI is past the pass's n bases: back to its row 0, on four rows.
	SUBQ n+48(FP), SI
	LEAQ (SI)(BX*4), SI
	DECQ passes+56(FP)
	JNZ p4pass

p4ret:
	MOVQ passes+56(FP), AX
	MOVQ AX, ret+72(FP)
	VZEROUPPER
	RET

	ESCAPES4

// func dotRows2x512(row *byte, base, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int, out *float32) int
TEXT ·dotRows2x512(SB), NOSPLIT, $0-96
	START
	CURSOR(R11, (R10)(BX*1), 8)
	ADDQ 0(R14), R10
	MOVQ acc+64(FP), R15
	LOADACC(0, 64, Z0, Z1)
	LOADACC(128, 192, Z2, Z3)

r2block:
	BASEOK((SI), r2out)
	BASEOK((SI)(BX*1), r2out)
	LOADX
	EXPS((R8), (SI))
	JNZ r2esc0
r2back0:
	WEIGHTS((DI), Z0, Z1)
	EXPS((R8)(BX*1), (SI)(BX*1))
	JNZ r2esc1
r2back1:
	WEIGHTS((DI)(BX*1), Z2, Z3)
	NEXT
	JNZ r2block

r2out:
	MOVQ n+56(FP), AX
	SUBQ CX, AX
	MOVQ AX, ret+88(FP)
	DONE(r2acc)
	FINISH(Z0, Y0, X0, Z1, Y1, X1, 0)
	FINISH(Z2, Y2, X2, Z3, Y3, X3, 4)
	VZEROUPPER
	RET

r2acc:
	STOREACC(0, 64, Z0, Z1)
	STOREACC(128, 192, Z2, Z3)
	MOVQ esc+32(FP), AX
	ADDQ row+0(FP), AX
	SUBQ AX, R10
	MOVQ R10, 0(R14)
	SUBQ BX, R11
	SUBQ AX, R11
	MOVQ R11, 8(R14)
	VZEROUPPER
	RET

r2esc0:
	ESCAPE(R10)
	JMP r2back0
r2esc1:
	ESCAPE(R11)
	JMP r2back1

// func dotRows1x512(row *byte, base, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int, out *float32) int
TEXT ·dotRows1x512(SB), NOSPLIT, $0-96
	START
	ADDQ 0(R14), R10
	MOVQ acc+64(FP), R15
	LOADACC(0, 64, Z0, Z1)

r1block:
	BASEOK((SI), r1out)
	LOADX
	EXPS((R8), (SI))
	JNZ r1esc0
r1back0:
	WEIGHTS((DI), Z0, Z1)
	NEXT
	JNZ r1block

r1out:
	MOVQ n+56(FP), AX
	SUBQ CX, AX
	MOVQ AX, ret+88(FP)
	DONE(r1acc)
	FINISH(Z0, Y0, X0, Z1, Y1, X1, 0)
	VZEROUPPER
	RET

r1acc:
	STOREACC(0, 64, Z0, Z1)
	MOVQ esc+32(FP), AX
	ADDQ row+0(FP), AX
	SUBQ AX, R10
	MOVQ R10, 0(R14)
	VZEROUPPER
	RET

r1esc0:
	ESCAPE(R10)
	JMP r1back0

// Qword order 0, 4, 1, 5, 2, 6, 3, 7: the byte unpacks, which work inside
// 128-bit lanes, then give columns 0–31 and 32–63 in column order.
DATA l12qperm<>+0(SB)/8, $0
DATA l12qperm<>+8(SB)/8, $4
DATA l12qperm<>+16(SB)/8, $1
DATA l12qperm<>+24(SB)/8, $5
DATA l12qperm<>+32(SB)/8, $2
DATA l12qperm<>+40(SB)/8, $6
DATA l12qperm<>+48(SB)/8, $3
DATA l12qperm<>+56(SB)/8, $7
GLOBL l12qperm<>(SB), RODATA|NOPTR, $64

// func decodeRows512(row *byte, sm, nib, esc, rb int, dst *byte, n, rows int) int
//
// Decodes the first n > 0 whole blocks of rows > 0 rows, the first at row
// and each rb bytes after the last (sm, nib and esc the offsets of a row's
// areas), into little-endian bf16 at dst, n·128 bytes a row one after the
// other, and returns how many escape bytes the last row's blocks use. One
// call decodes a chunk of rows of whole blocks, so a narrow row does not
// pay a call and the constants. Per block, EXPS and ESCAPE give the
// exponents in column order as for the mat-vec; the high byte of each
// code is (s & 0x80) | e>>1 and the low byte (e & 1)<<7 | (s & 0x7f), one
// shift and one bit select each, and VPUNPCKLBW / VPUNPCKHBW interleave
// them, from qword order 0, 4, 1, 5, 2, 6, 3, 7, into the block's 128
// bytes (two VPERMI2B instead, with no VPERMQ, are slower on the
// development host: its permutes of bytes across lanes cost more).
TEXT ·decodeRows512(SB), NOSPLIT, $0-72
	MOVQ row+0(FP), R12
	MOVQ rb+32(FP), BX
	MOVQ dst+40(FP), R11
	MOVQ rows+56(FP), R9
	CONSTS512
	VMOVDQU64 l12qperm<>(SB), Z28

d5row:
	MOVQ R12, SI
	MOVQ sm+8(FP), DI
	ADDQ R12, DI
	MOVQ nib+16(FP), R8
	ADDQ R12, R8
	MOVQ esc+24(FP), R10
	ADDQ R12, R10
	MOVQ n+48(FP), CX

d5block:
	EXPS((R8), (SI))
	JNZ d5esc
d5back:
	VPERMQ Z16, Z28, Z16
	VPERMQ (DI), Z28, Z17
	VPSRLW $1, Z16, Z18
	VPTERNLOGD $0xD8, Z29, Z17, Z18
	VPSLLW $7, Z16, Z16
	VPTERNLOGD $0xE4, Z29, Z17, Z16
	VPUNPCKLBW Z18, Z16, Z19
	VPUNPCKHBW Z18, Z16, Z20
	VMOVDQU64 Z19, (R11)
	VMOVDQU64 Z20, 64(R11)
	ADDQ $1, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $128, R11
	DECQ CX
	JNZ d5block

	ADDQ BX, R12
	DECQ R9
	JNZ d5row

	// The last row's cursor, less its area's start.
	MOVQ esc+24(FP), AX
	ADDQ R12, AX
	SUBQ BX, AX
	SUBQ AX, R10
	MOVQ R10, ret+64(FP)
	VZEROUPPER
	RET

d5esc:
	ESCAPE(R10)
	JMP d5back
