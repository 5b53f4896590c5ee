//go:build !purego

#include "textflag.h"

// KDA recurrence row passes: sixteen float32 lanes per zmm while sixteen
// remain and z is set (AVX-512), then eight per ymm. Multiplies and
// adds are separate instructions (never FMA), each rounded like the scalar
// float32 statements in kdastep.go. The scalar operand is the first source
// operand of each multiply, as in the Go code (a·row, k·s, kb·e, q·s).

// func decayReadAVX(row, u *float32, a, k float32, n int, z bool)
TEXT ·decayReadAVX(SB), NOSPLIT, $0-33
	MOVQ row+0(FP), DI
	MOVQ u+8(FP), SI
	VBROADCASTSS a+16(FP), Z6
	VBROADCASTSS k+20(FP), Z7
	MOVQ n+24(FP), CX
	XORQ BX, BX
	CMPB z+32(FP), $0
	JEQ  dr_loop

dr_zmm:
	LEAQ    16(BX), AX
	CMPQ    AX, CX
	JGT     dr_loop
	VMULPS  (DI)(BX*4), Z6, Z0
	VMOVUPS Z0, (DI)(BX*4)
	VMULPS  Z0, Z7, Z1
	VADDPS  (SI)(BX*4), Z1, Z1
	VMOVUPS Z1, (SI)(BX*4)
	MOVQ    AX, BX
	JMP     dr_zmm

dr_loop:
	CMPQ    BX, CX
	JGE     dr_done
	VMULPS  (DI)(BX*4), Y6, Y0 // s = a·row
	VMOVUPS Y0, (DI)(BX*4)
	VMULPS  Y0, Y7, Y1         // k·s
	VADDPS  (SI)(BX*4), Y1, Y1 // u + k·s
	VMOVUPS Y1, (SI)(BX*4)
	ADDQ    $8, BX
	JMP     dr_loop

dr_done:
	VZEROUPPER
	RET

// func writeOutAVX(row, o, e *float32, kb, q float32, n int, z bool)
TEXT ·writeOutAVX(SB), NOSPLIT, $0-41
	MOVQ row+0(FP), DI
	MOVQ o+8(FP), SI
	MOVQ e+16(FP), DX
	VBROADCASTSS kb+24(FP), Z6
	VBROADCASTSS q+28(FP), Z7
	MOVQ n+32(FP), CX
	XORQ BX, BX
	CMPB z+40(FP), $0
	JEQ  wo_loop

wo_zmm:
	LEAQ    16(BX), AX
	CMPQ    AX, CX
	JGT     wo_loop
	VMULPS  (DX)(BX*4), Z6, Z0
	VADDPS  (DI)(BX*4), Z0, Z0
	VMOVUPS Z0, (DI)(BX*4)
	VMULPS  Z0, Z7, Z1
	VADDPS  (SI)(BX*4), Z1, Z1
	VMOVUPS Z1, (SI)(BX*4)
	MOVQ    AX, BX
	JMP     wo_zmm

wo_loop:
	CMPQ    BX, CX
	JGE     wo_done
	VMULPS  (DX)(BX*4), Y6, Y0 // kb·e
	VADDPS  (DI)(BX*4), Y0, Y0 // s = row + kb·e
	VMOVUPS Y0, (DI)(BX*4)
	VMULPS  Y0, Y7, Y1         // q·s
	VADDPS  (SI)(BX*4), Y1, Y1 // o + q·s
	VMOVUPS Y1, (SI)(BX*4)
	ADDQ    $8, BX
	JMP     wo_loop

wo_done:
	VZEROUPPER
	RET

// func writeDecayAVX(row, o, e, u *float32, kb, q, a, k float32, n int, z bool)
TEXT ·writeDecayAVX(SB), NOSPLIT, $0-57
	MOVQ row+0(FP), DI
	MOVQ o+8(FP), SI
	MOVQ e+16(FP), DX
	MOVQ u+24(FP), R8
	VBROADCASTSS kb+32(FP), Z6
	VBROADCASTSS q+36(FP), Z7
	VBROADCASTSS a+40(FP), Z8
	VBROADCASTSS k+44(FP), Z9
	MOVQ n+48(FP), CX
	XORQ BX, BX
	CMPB z+56(FP), $0
	JEQ  wd_loop

wd_zmm:
	LEAQ    16(BX), AX
	CMPQ    AX, CX
	JGT     wd_loop
	VMULPS  (DX)(BX*4), Z6, Z0
	VADDPS  (DI)(BX*4), Z0, Z0
	VMULPS  Z0, Z7, Z1
	VADDPS  (SI)(BX*4), Z1, Z1
	VMOVUPS Z1, (SI)(BX*4)
	VMULPS  Z0, Z8, Z0
	VMOVUPS Z0, (DI)(BX*4)
	VMULPS  Z0, Z9, Z1
	VADDPS  (R8)(BX*4), Z1, Z1
	VMOVUPS Z1, (R8)(BX*4)
	MOVQ    AX, BX
	JMP     wd_zmm

wd_loop:
	CMPQ    BX, CX
	JGE     wd_done
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
	JMP     wd_loop

wd_done:
	VZEROUPPER
	RET
