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

// ROWLOOP runs one pass over the n elements in CX from BX = 0: ZPASS
// sixteen at a time while sixteen remain and the byte at Z is set, then
// YPASS eight at a time; it returns from the function. The scalars arrive
// broadcast in ymm registers (VEX encoding, so a CPU without AVX-512 never
// meets an EVEX instruction); ZWIDEN widens them to zmm on the AVX-512
// branch only.
#define ROWLOOP(Z, ZWIDEN, ZPASS, YPASS) \
	XORQ BX, BX; \
	CMPB Z, $0; \
	JEQ  rl_ymm; \
	ZWIDEN; \
rl_zmm: \
	LEAQ 16(BX), AX; \
	CMPQ AX, CX; \
	JGT  rl_ymm; \
	ZPASS; \
	MOVQ AX, BX; \
	JMP  rl_zmm; \
rl_ymm: \
	CMPQ BX, CX; \
	JGE  rl_done; \
	YPASS; \
	ADDQ $8, BX; \
	JMP  rl_ymm; \
rl_done: \
	VZEROUPPER; \
	RET

#define DR_Z DECAYREAD(Z0, Z1, Z6, Z7)
#define DR_Y DECAYREAD(Y0, Y1, Y6, Y7)
#define WO_Z WRITEOUT(Z0, Z1, Z6, Z7)
#define WO_Y WRITEOUT(Y0, Y1, Y6, Y7)
#define WD_Z WRITEDECAY(Z0, Z1, Z6, Z7, Z8, Z9)
#define WD_Y WRITEDECAY(Y0, Y1, Y6, Y7, Y8, Y9)
#define WIDEN67 VBROADCASTSS X6, Z6; VBROADCASTSS X7, Z7
#define WIDEN6789 WIDEN67; VBROADCASTSS X8, Z8; VBROADCASTSS X9, Z9

// func decayReadAVX(row, u *float32, a, k float32, n int, z bool)
TEXT ·decayReadAVX(SB), NOSPLIT, $0-33
	MOVQ row+0(FP), DI
	MOVQ u+8(FP), SI
	VBROADCASTSS a+16(FP), Y6
	VBROADCASTSS k+20(FP), Y7
	MOVQ n+24(FP), CX
	ROWLOOP(z+32(FP), WIDEN67, DR_Z, DR_Y)

// func writeOutAVX(row, o, e *float32, kb, q float32, n int, z bool)
TEXT ·writeOutAVX(SB), NOSPLIT, $0-41
	MOVQ row+0(FP), DI
	MOVQ o+8(FP), SI
	MOVQ e+16(FP), DX
	VBROADCASTSS kb+24(FP), Y6
	VBROADCASTSS q+28(FP), Y7
	MOVQ n+32(FP), CX
	ROWLOOP(z+40(FP), WIDEN67, WO_Z, WO_Y)

// func writeDecayAVX(row, o, e, u *float32, kb, q, a, k float32, n int, z bool)
TEXT ·writeDecayAVX(SB), NOSPLIT, $0-57
	MOVQ row+0(FP), DI
	MOVQ o+8(FP), SI
	MOVQ e+16(FP), DX
	MOVQ u+24(FP), R8
	VBROADCASTSS kb+32(FP), Y6
	VBROADCASTSS q+36(FP), Y7
	VBROADCASTSS a+40(FP), Y8
	VBROADCASTSS k+44(FP), Y9
	MOVQ n+48(FP), CX
	ROWLOOP(z+56(FP), WIDEN6789, WD_Z, WD_Y)

// WRITEDECAY for whole rows of 128 with o, u and e in registers: o in
// Z0–Z7, u in Z8–Z15, e in Z16–Z23; Z28 = kb, Z29 = q, Z30 = a, Z31 = k.
// Vector v of the row at DI.
#define WDREG(v, O, U, E) \
	VMULPS  E, Z28, Z24; \
	VADDPS  (v*64)(DI), Z24, Z24; \
	VMULPS  Z24, Z29, Z25; \
	VADDPS  O, Z25, O; \
	VMULPS  Z24, Z30, Z24; \
	VMOVUPS Z24, (v*64)(DI); \
	VMULPS  Z24, Z31, Z25; \
	VADDPS  U, Z25, U

// func writeDecayHead(S, o, e, u, kt *float32, b float32, q, an, kn *float32)
//
// writeDecay for every row of a 128×128 state (rows at S + 512·i, their
// scalars kb = kt[i]·b, q[i], an[i], kn[i]) with o and u accumulated in
// registers from +0 and stored once, o at the end and u for the next
// position: the same statements in the same order as the row pass called
// once per row, without reloading and storing o and u for every row.
TEXT ·writeDecayHead(SB), NOSPLIT, $0-72
	MOVQ S+0(FP), DI
	MOVQ e+16(FP), DX
	MOVQ kt+32(FP), R9
	MOVQ q+48(FP), R10
	MOVQ an+56(FP), R11
	MOVQ kn+64(FP), R12
	VMOVUPS 0(DX), Z16
	VMOVUPS 64(DX), Z17
	VMOVUPS 128(DX), Z18
	VMOVUPS 192(DX), Z19
	VMOVUPS 256(DX), Z20
	VMOVUPS 320(DX), Z21
	VMOVUPS 384(DX), Z22
	VMOVUPS 448(DX), Z23
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ $128, CX

wdh_row:
	VMOVSS       (R9), X28
	VMULSS       b+40(FP), X28, X28
	VBROADCASTSS X28, Z28
	VBROADCASTSS (R10), Z29
	VBROADCASTSS (R11), Z30
	VBROADCASTSS (R12), Z31
	WDREG(0, Z0, Z8, Z16)
	WDREG(1, Z1, Z9, Z17)
	WDREG(2, Z2, Z10, Z18)
	WDREG(3, Z3, Z11, Z19)
	WDREG(4, Z4, Z12, Z20)
	WDREG(5, Z5, Z13, Z21)
	WDREG(6, Z6, Z14, Z22)
	WDREG(7, Z7, Z15, Z23)
	ADDQ $512, DI
	ADDQ $4, R9
	ADDQ $4, R10
	ADDQ $4, R11
	ADDQ $4, R12
	DECQ CX
	JNZ  wdh_row

	MOVQ o+8(FP), SI
	MOVQ u+24(FP), R8
	VMOVUPS Z0, 0(SI)
	VMOVUPS Z1, 64(SI)
	VMOVUPS Z2, 128(SI)
	VMOVUPS Z3, 192(SI)
	VMOVUPS Z4, 256(SI)
	VMOVUPS Z5, 320(SI)
	VMOVUPS Z6, 384(SI)
	VMOVUPS Z7, 448(SI)
	VMOVUPS Z8, 0(R8)
	VMOVUPS Z9, 64(R8)
	VMOVUPS Z10, 128(R8)
	VMOVUPS Z11, 192(R8)
	VMOVUPS Z12, 256(R8)
	VMOVUPS Z13, 320(R8)
	VMOVUPS Z14, 384(R8)
	VMOVUPS Z15, 448(R8)
	VZEROUPPER
	RET
