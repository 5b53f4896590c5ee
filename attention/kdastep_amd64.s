//go:build !purego

#include "textflag.h"

// KDA recurrence row passes, eight float32 lanes per ymm. Multiplies and
// adds are separate instructions (never FMA), each rounded like the scalar
// float32 statements in kdastep.go. The scalar operand is the first source
// operand of each multiply, as in the Go code (a·row, k·s, kb·e, q·s).

// func decayReadAVX(row, u *float32, a, k float32, n int)
TEXT ·decayReadAVX(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), DI
	MOVQ u+8(FP), SI
	VBROADCASTSS a+16(FP), Y6
	VBROADCASTSS k+20(FP), Y7
	MOVQ n+24(FP), CX
	XORQ BX, BX

dr_loop:
	VMULPS  (DI)(BX*4), Y6, Y0 // s = a·row
	VMOVUPS Y0, (DI)(BX*4)
	VMULPS  Y0, Y7, Y1         // k·s
	VADDPS  (SI)(BX*4), Y1, Y1 // u + k·s
	VMOVUPS Y1, (SI)(BX*4)
	ADDQ    $8, BX
	CMPQ    BX, CX
	JLT     dr_loop
	VZEROUPPER
	RET

// func writeOutAVX(row, o, e *float32, kb, q float32, n int)
TEXT ·writeOutAVX(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), DI
	MOVQ o+8(FP), SI
	MOVQ e+16(FP), DX
	VBROADCASTSS kb+24(FP), Y6
	VBROADCASTSS q+28(FP), Y7
	MOVQ n+32(FP), CX
	XORQ BX, BX

wo_loop:
	VMULPS  (DX)(BX*4), Y6, Y0 // kb·e
	VADDPS  (DI)(BX*4), Y0, Y0 // s = row + kb·e
	VMOVUPS Y0, (DI)(BX*4)
	VMULPS  Y0, Y7, Y1         // q·s
	VADDPS  (SI)(BX*4), Y1, Y1 // o + q·s
	VMOVUPS Y1, (SI)(BX*4)
	ADDQ    $8, BX
	CMPQ    BX, CX
	JLT     wo_loop
	VZEROUPPER
	RET

// func writeDecayAVX(row, o, e, u *float32, kb, q, a, k float32, n int)
TEXT ·writeDecayAVX(SB), NOSPLIT, $0-56
	MOVQ row+0(FP), DI
	MOVQ o+8(FP), SI
	MOVQ e+16(FP), DX
	MOVQ u+24(FP), R8
	VBROADCASTSS kb+32(FP), Y6
	VBROADCASTSS q+36(FP), Y7
	VBROADCASTSS a+40(FP), Y8
	VBROADCASTSS k+44(FP), Y9
	MOVQ n+48(FP), CX
	XORQ BX, BX

wd_loop:
	VMULPS  (DX)(BX*4), Y6, Y0 // kb·e
	VADDPS  (DI)(BX*4), Y0, Y0 // s = row + kb·e
	VMULPS  Y0, Y7, Y1         // q·s
	VADDPS  (SI)(BX*4), Y1, Y1 // o + q·s
	VMOVUPS Y1, (SI)(BX*4)
	VMULPS  Y0, Y8, Y0         // s = a·s
	VMOVUPS Y0, (DI)(BX*4)
	VMULPS  Y0, Y9, Y1         // k·s
	VADDPS  (R8)(BX*4), Y1, Y1 // u + k·s
	VMOVUPS Y1, (R8)(BX*4)
	ADDQ    $8, BX
	CMPQ    BX, CX
	JLT     wd_loop
	VZEROUPPER
	RET
