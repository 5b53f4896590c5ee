//go:build amd64 && !purego

#include "textflag.h"

// Byte constants, repeated in both 128-bit lanes.
DATA l12nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA l12nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA l12nib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA l12nib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL l12nib<>(SB), RODATA|NOPTR, $32

// 0, 1, ..., 15: added to the broadcast base, the window's exponents.
DATA l12iota<>+0(SB)/8, $0x0706050403020100
DATA l12iota<>+8(SB)/8, $0x0f0e0d0c0b0a0908
DATA l12iota<>+16(SB)/8, $0x0706050403020100
DATA l12iota<>+24(SB)/8, $0x0f0e0d0c0b0a0908
GLOBL l12iota<>(SB), RODATA|NOPTR, $32

DATA l12x80<>+0(SB)/8, $0x8080808080808080
DATA l12x80<>+8(SB)/8, $0x8080808080808080
DATA l12x80<>+16(SB)/8, $0x8080808080808080
DATA l12x80<>+24(SB)/8, $0x8080808080808080
GLOBL l12x80<>(SB), RODATA|NOPTR, $32

DATA l12x7f<>+0(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA l12x7f<>+8(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA l12x7f<>+16(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA l12x7f<>+24(SB)/8, $0x7f7f7f7f7f7f7f7f
GLOBL l12x7f<>(SB), RODATA|NOPTR, $32

// func decodeBlocksAVX2(dst, sm, nib, bases *byte, n int) int
//
// Per block of 64 weights: the 32 index bytes split into the indices of
// the even columns (low nibbles) and the odd ones (high nibbles); a block
// with any index 15 (an escape) ends the run. VPSHUFB looks the indices up
// in the table base+0..15, giving each weight's exponent e. With s the
// sign-and-mantissa byte, the bf16 code's high byte is (s & 0x80) | e>>1
// and its low byte (e & 1)<<7 | (s & 0x7f). VPUNPCK interleaves within
// 128-bit lanes, so each input is first put in qword order 0, 2, 1, 3
// (VPERMQ $0xD8) to come out in column order.
TEXT ·decodeBlocksAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ sm+8(FP), SI
	MOVQ nib+16(FP), R8
	MOVQ bases+24(FP), R9
	MOVQ n+32(FP), CX
	XORQ AX, AX
	VMOVDQU l12nib<>(SB), Y15
	VMOVDQU l12iota<>(SB), Y14
	VMOVDQU l12x80<>(SB), Y13
	VMOVDQU l12x7f<>(SB), Y12
	VPCMPEQB Y11, Y11, Y11
	VPSRLW $4, Y11, Y11
	VPAND Y15, Y11, Y11 // 0x0f in every byte: the escape index

loop:
	CMPQ AX, CX
	JGE done

	// Indices: Y0 even columns, Y1 odd columns, qwords in order 0, 2, 1, 3.
	VPERMQ $0xD8, (R8), Y1
	VPAND Y15, Y1, Y0
	VPSRLW $4, Y1, Y1
	VPAND Y15, Y1, Y1
	VPCMPEQB Y11, Y0, Y2
	VPCMPEQB Y11, Y1, Y3
	VPOR Y2, Y3, Y2
	VPMOVMSKB Y2, DX
	TESTL DX, DX
	JNZ done

	// The window: base + 0..15 in every byte position of the table.
	MOVBLZX (R9)(AX*1), DX
	VMOVD DX, X4
	VPBROADCASTB X4, Y4
	VPADDB Y14, Y4, Y4
	VPSHUFB Y0, Y4, Y0
	VPSHUFB Y1, Y4, Y1

	// Exponents in column order: Y2 columns 0–31, Y3 columns 32–63.
	VPUNPCKLBW Y1, Y0, Y2
	VPUNPCKHBW Y1, Y0, Y3

	// Columns 0–31.
	VMOVDQU (SI), Y5
	VPAND Y13, Y5, Y6 // sign
	VPAND Y12, Y5, Y7 // mantissa
	VPSRLW $1, Y2, Y8
	VPAND Y12, Y8, Y8
	VPOR Y8, Y6, Y6   // high bytes
	VPSLLW $7, Y2, Y8
	VPAND Y13, Y8, Y8
	VPOR Y8, Y7, Y7   // low bytes
	VPERMQ $0xD8, Y6, Y6
	VPERMQ $0xD8, Y7, Y7
	VPUNPCKLBW Y6, Y7, Y8
	VPUNPCKHBW Y6, Y7, Y9
	VMOVDQU Y8, (DI)
	VMOVDQU Y9, 32(DI)

	// Columns 32–63.
	VMOVDQU 32(SI), Y5
	VPAND Y13, Y5, Y6
	VPAND Y12, Y5, Y7
	VPSRLW $1, Y3, Y8
	VPAND Y12, Y8, Y8
	VPOR Y8, Y6, Y6
	VPSLLW $7, Y3, Y8
	VPAND Y13, Y8, Y8
	VPOR Y8, Y7, Y7
	VPERMQ $0xD8, Y6, Y6
	VPERMQ $0xD8, Y7, Y7
	VPUNPCKLBW Y6, Y7, Y8
	VPUNPCKHBW Y6, Y7, Y9
	VMOVDQU Y8, 64(DI)
	VMOVDQU Y9, 96(DI)

	ADDQ $128, DI
	ADDQ $64, SI
	ADDQ $32, R8
	INCQ AX
	JMP loop

done:
	VZEROUPPER
	MOVQ AX, ret+40(FP)
	RET

// 0xffff0000 in every dword: keeps the odd column of each pair of bf16.
DATA l12hi16<>+0(SB)/8, $0xffff0000ffff0000
DATA l12hi16<>+8(SB)/8, $0xffff0000ffff0000
GLOBL l12hi16<>(SB), RODATA|NOPTR, $16

// HALF multiplies the eight bf16 codes of columns 8k … 8k+7 in X (as the
// pairs of a row in memory) into the lanes: the even columns, widened by a
// shift, go to AE with the activations at off(DX), the odd ones, masked,
// to AO with those at off+32(DX) (the caller stores each run of eight
// activations as columns 0, 2, 4, 6, 1, 3, 5, 7). Products of a bf16 and
// a float32 are exact in float64, so the fused multiply-add rounds only
// the sum.
#define HALF(X, AE, AO, off) \
	VPSLLD $16, X, X13; \
	VPAND l12hi16<>(SB), X, X14; \
	VCVTPS2PD X13, Y13; \
	VCVTPS2PD X14, Y14; \
	VFMADD231PD off(DX), Y13, AE; \
	VFMADD231PD off+32(DX), Y14, AO

// WORDS rebuilds bf16 codes from their exponents E and sign-and-mantissa
// bytes S (the same columns in the same byte positions): the high byte is
// (s & 0x80) | e>>1, the low byte (e & 1)<<7 | (s & 0x7f). Within each
// 128-bit lane OL gets the codes of the first eight columns, OH the next
// eight.
#define WORDS(E, S, OL, OH) \
	VPAND l12x80<>(SB), S, Y13; \
	VPAND l12x7f<>(SB), S, Y14; \
	VPSRLW $1, E, Y4; \
	VPAND l12x7f<>(SB), Y4, Y4; \
	VPOR Y4, Y13, Y13; \
	VPSLLW $7, E, Y4; \
	VPAND l12x80<>(SB), Y4, Y4; \
	VPOR Y4, Y14, Y14; \
	VPUNPCKLBW Y13, Y14, OL; \
	VPUNPCKHBW Y13, Y14, OH

// func dotBlocksAVX2(sm, nib, bases *byte, x *float64, n int, acc *[16]float64) int
//
// Adds to the R16 lanes in acc the products of up to n whole blocks of a
// row with the activations x (float64, each run of eight stored as columns
// 0, 2, 4, 6, 1, 3, 5, 7), decoding each weight in registers, and returns
// how many blocks it took: it stops before the first block with an escape,
// which the caller adds in Go before calling again. acc holds the lanes in
// the order of the registers: 0, 2, 4, 6 | 1, 3, 5, 7 | 8, 10, 12, 14 |
// 9, 11, 13, 15.
//
// Nothing crosses a 128-bit lane: the index bytes unpack into exponents of
// columns [0–15 | 32–47] and [16–31 | 48–63], the sign-and-mantissa bytes
// are loaded in the same arrangement, and the codes come out as runs of
// eight columns, which are multiplied in column order (0–7, 8–15, …), so
// each lane still adds its columns in ascending order.
TEXT ·dotBlocksAVX2(SB), NOSPLIT, $0-56
	MOVQ sm+0(FP), SI
	MOVQ nib+8(FP), R8
	MOVQ bases+16(FP), R9
	MOVQ x+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ acc+40(FP), DI
	XORQ BX, BX
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VMOVDQU l12nib<>(SB), Y15

block:
	CMPQ BX, CX
	JGE end
	VMOVDQU (R8), Y5
	VPAND Y15, Y5, Y4
	VPSRLW $4, Y5, Y5
	VPAND Y15, Y5, Y5
	VPCMPEQB Y15, Y4, Y6
	VPCMPEQB Y15, Y5, Y7
	VPOR Y6, Y7, Y6
	VPMOVMSKB Y6, AX
	TESTL AX, AX
	JNZ end
	MOVBLZX (R9)(BX*1), AX
	VMOVD AX, X6
	VPBROADCASTB X6, Y6
	VPADDB l12iota<>(SB), Y6, Y6
	VPSHUFB Y4, Y6, Y4
	VPSHUFB Y5, Y6, Y5
	VPUNPCKLBW Y5, Y4, Y6 // exponents of columns [0–15 | 32–47]
	VPUNPCKHBW Y5, Y4, Y7 // [16–31 | 48–63]
	VMOVDQU (SI), X8
	VINSERTI128 $1, 32(SI), Y8, Y8
	WORDS(Y6, Y8, Y9, Y10) // codes of [0–7 | 32–39], [8–15 | 40–47]
	VMOVDQU 16(SI), X8
	VINSERTI128 $1, 48(SI), Y8, Y8
	WORDS(Y7, Y8, Y11, Y12) // [16–23 | 48–55], [24–31 | 56–63]
	HALF(X9, Y0, Y1, 0)
	HALF(X10, Y2, Y3, 64)
	HALF(X11, Y0, Y1, 128)
	HALF(X12, Y2, Y3, 192)
	VEXTRACTI128 $1, Y9, X9
	HALF(X9, Y0, Y1, 256)
	VEXTRACTI128 $1, Y10, X10
	HALF(X10, Y2, Y3, 320)
	VEXTRACTI128 $1, Y11, X11
	HALF(X11, Y0, Y1, 384)
	VEXTRACTI128 $1, Y12, X12
	HALF(X12, Y2, Y3, 448)
	ADDQ $512, DX
	ADDQ $64, SI
	ADDQ $32, R8
	INCQ BX
	JMP block

end:
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	MOVQ BX, ret+48(FP)
	RET

DATA l12x0e<>+0(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA l12x0e<>+8(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA l12x0e<>+16(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA l12x0e<>+24(SB)/8, $0x0e0e0e0e0e0e0e0e
GLOBL l12x0e<>(SB), RODATA|NOPTR, $32

// func plainBlocksAVX2(nib, bases *byte, n, ahead int) int
//
// The count of leading blocks of n that plainBlock accepts: base at most 241, no index 15, and
// for a base above 0 some index 14. One block's 32 index bytes a step, each step prefetching
// the bytes ahead bytes further on (the next row's indices: a piece is checked row by row, and
// its bytes have just been read from the device, so none is in a cache).
TEXT ·plainBlocksAVX2(SB), NOSPLIT, $0-40
	MOVQ nib+0(FP), SI
	MOVQ bases+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ ahead+24(FP), DX
	XORQ AX, AX
	VMOVDQU l12nib<>(SB), Y15
	VMOVDQU l12x0e<>(SB), Y14

plainloop:
	CMPQ AX, CX
	JAE  plaindone
	MOVBLZX (DI)(AX*1), BX
	CMPL BX, $241
	JA   plaindone
	PREFETCHT0 (SI)(DX*1)
	VMOVDQU (SI), Y0
	VPSRLW $4, Y0, Y1
	VPAND Y15, Y0, Y0
	VPAND Y15, Y1, Y1
	VPCMPEQB Y15, Y0, Y2
	VPCMPEQB Y15, Y1, Y3
	VPOR Y2, Y3, Y2
	VPTEST Y2, Y2
	JNZ  plaindone // an escape
	TESTL BX, BX
	JZ   plainnext
	VPCMPEQB Y14, Y0, Y2
	VPCMPEQB Y14, Y1, Y3
	VPOR Y2, Y3, Y2
	VPTEST Y2, Y2
	JZ   plaindone // a base above 0 whose window top is unused

plainnext:
	ADDQ $32, SI
	INCQ AX
	JMP  plainloop

plaindone:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET
