//go:build !purego

#include "textflag.h"

// SiTU-GLU's float32 statements around the vector tanh and sigmoid,
// sixteen elements per step (n a multiple of 16), each instruction the
// rounding of the scalar statement in glu.go with the same first operand.

// func gluArgs(t1, t3 *float64, gate, up *float32, beta1, beta2 float32, n int)
//
// t1[i] = f64(gate[i] ⊘ β1), t3[i] = f64(up[i] ⊘ β2).
TEXT ·gluArgs(SB), NOSPLIT, $0-48
	MOVQ t1+0(FP), DI
	MOVQ t3+8(FP), R8
	MOVQ gate+16(FP), SI
	MOVQ up+24(FP), DX
	VBROADCASTSS beta1+32(FP), Z4
	VBROADCASTSS beta2+36(FP), Z5
	MOVQ n+40(FP), CX

galoop:
	VMOVUPS  0(SI), Z0
	VDIVPS   Z4, Z0, Z0
	VMOVUPS  0(DX), Z1
	VDIVPS   Z5, Z1, Z1
	VCVTPS2PD Y0, Z2
	VEXTRACTF32X8 $1, Z0, Y0
	VCVTPS2PD Y0, Z3
	VMOVUPD  Z2, 0(DI)
	VMOVUPD  Z3, 64(DI)
	VCVTPS2PD Y1, Z2
	VEXTRACTF32X8 $1, Z1, Y1
	VCVTPS2PD Y1, Z3
	VMOVUPD  Z2, 0(R8)
	VMOVUPD  Z3, 64(R8)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $128, DI
	ADDQ $128, R8
	SUBQ $16, CX
	JNZ  galoop
	VZEROUPPER
	RET

// func gluOut(dst *float32, t1, t3 *float64, s *float32, beta1, beta2 float32, n int)
//
// dst[i] = ((β1 ⊗ f32(t1[i])) ⊗ s[i]) ⊗ (β2 ⊗ f32(t3[i])).
TEXT ·gluOut(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ t1+8(FP), SI
	MOVQ t3+16(FP), DX
	MOVQ s+24(FP), R8
	VBROADCASTSS beta1+32(FP), Z4
	VBROADCASTSS beta2+36(FP), Z5
	MOVQ n+40(FP), CX

goloop:
	VCVTPD2PS 0(SI), Y0
	VCVTPD2PS 64(SI), Y1
	VINSERTF32X8 $1, Y1, Z0, Z0
	VCVTPD2PS 0(DX), Y2
	VCVTPD2PS 64(DX), Y3
	VINSERTF32X8 $1, Y3, Z2, Z2
	VMULPS  Z0, Z4, Z0
	VMULPS  0(R8), Z0, Z0
	VMULPS  Z2, Z5, Z2
	VMULPS  Z2, Z0, Z0
	VMOVUPS Z0, 0(DI)
	ADDQ $128, SI
	ADDQ $128, DX
	ADDQ $64, R8
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  goloop
	VZEROUPPER
	RET
