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
