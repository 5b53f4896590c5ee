//go:build !purego

#include "textflag.h"

// KDA recurrence row passes: sixteen float32 lanes per zmm while sixteen
// remain and z is set (AVX-512), then eight per ymm. Multiplies and
// adds are separate instructions (never FMA), each rounded like the scalar
// float32 statements in kdastep.go. The scalar operand is the first source
// operand of each multiply, as in the Go code (a·row, k·s, kb·e, q·s).

// One vector of each pass at element BX, in the registers given (ymm or
// zmm): V6, V7, … hold the broadcast scalars.

// s = a·row; row = s; u = u + k·s (row at DI, u at SI; V6 = a, V7 = k).
#define DECAYREAD(V0, V1, V6, V7) \
	VMULPS  (DI)(BX*4), V6, V0; \
	VMOVUPS V0, (DI)(BX*4); \
	VMULPS  V0, V7, V1; \
	VADDPS  (SI)(BX*4), V1, V1; \
	VMOVUPS V1, (SI)(BX*4)

// s = row + kb·e; row = s; o = o + q·s (row DI, o SI, e DX; V6 = kb, V7 = q).
#define WRITEOUT(V0, V1, V6, V7) \
	VMULPS  (DX)(BX*4), V6, V0; \
	VADDPS  (DI)(BX*4), V0, V0; \
	VMOVUPS V0, (DI)(BX*4); \
	VMULPS  V0, V7, V1; \
	VADDPS  (SI)(BX*4), V1, V1; \
	VMOVUPS V1, (SI)(BX*4)

// WRITEOUT then DECAYREAD on the result: s = row + kb·e; o = o + q·s;
// s = a·s; row = s; u = u + k·s (u at R8; V8 = a, V9 = k).
#define WRITEDECAY(V0, V1, V6, V7, V8, V9) \
	VMULPS  (DX)(BX*4), V6, V0; \
	VADDPS  (DI)(BX*4), V0, V0; \
	VMULPS  V0, V7, V1; \
	VADDPS  (SI)(BX*4), V1, V1; \
	VMOVUPS V1, (SI)(BX*4); \
	VMULPS  V0, V8, V0; \
	VMOVUPS V0, (DI)(BX*4); \
	VMULPS  V0, V9, V1; \
	VADDPS  (R8)(BX*4), V1, V1; \
	VMOVUPS V1, (R8)(BX*4)

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
	DECAYREAD(Z0, Z1, Z6, Z7)
	MOVQ    AX, BX
	JMP     dr_zmm

dr_loop:
	CMPQ    BX, CX
	JGE     dr_done
	DECAYREAD(Y0, Y1, Y6, Y7)
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
	WRITEOUT(Z0, Z1, Z6, Z7)
	MOVQ    AX, BX
	JMP     wo_zmm

wo_loop:
	CMPQ    BX, CX
	JGE     wo_done
	WRITEOUT(Y0, Y1, Y6, Y7)
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
	WRITEDECAY(Z0, Z1, Z6, Z7, Z8, Z9)
	MOVQ    AX, BX
	JMP     wd_zmm

wd_loop:
	CMPQ    BX, CX
	JGE     wd_done
	WRITEDECAY(Y0, Y1, Y6, Y7, Y8, Y9)
	ADDQ    $8, BX
	JMP     wd_loop

wd_done:
	VZEROUPPER
	RET
