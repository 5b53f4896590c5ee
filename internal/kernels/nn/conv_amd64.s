//go:build !purego

#include "textflag.h"

// func convBlock4(dst *float32, dstride int, buf *float32, w *float32, wstride int, T int)
//
// The kernel-4 short convolution of one run of 64 channels over T
// positions, before the SiLU: buf holds rows of 64 inputs (256 bytes each),
// the three history rows oldest first and then the T positions' inputs;
// tap j's 64 weights are at w + j·wstride. Row t of dst (at dst +
// t·dstride) gets acc = w3 ⊗ x_t, then acc = acc ⊕ (w_j ⊗ buf[t+j]) for
// j = 0, 1, 2: the statements of channels' Go loop in its order, sixteen
// channels per vector.
TEXT ·convBlock4(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), BX
	MOVQ buf+16(FP), SI
	MOVQ w+24(FP), DX
	MOVQ wstride+32(FP), R8
	MOVQ T+40(FP), CX
	MOVQ DX, R9
	VMOVUPS 0(R9), Z16
	VMOVUPS 64(R9), Z17
	VMOVUPS 128(R9), Z18
	VMOVUPS 192(R9), Z19
	ADDQ R8, R9
	VMOVUPS 0(R9), Z20
	VMOVUPS 64(R9), Z21
	VMOVUPS 128(R9), Z22
	VMOVUPS 192(R9), Z23
	ADDQ R8, R9
	VMOVUPS 0(R9), Z24
	VMOVUPS 64(R9), Z25
	VMOVUPS 128(R9), Z26
	VMOVUPS 192(R9), Z27
	ADDQ R8, R9
	VMOVUPS 0(R9), Z28
	VMOVUPS 64(R9), Z29
	VMOVUPS 128(R9), Z30
	VMOVUPS 192(R9), Z31
	TESTQ CX, CX
	JZ    cb4done

cb4loop:
	VMULPS 768(SI), Z28, Z0
	VMULPS 832(SI), Z29, Z1
	VMULPS 896(SI), Z30, Z2
	VMULPS 960(SI), Z31, Z3
	VMULPS 0(SI), Z16, Z4
	VADDPS Z4, Z0, Z0
	VMULPS 64(SI), Z17, Z5
	VADDPS Z5, Z1, Z1
	VMULPS 128(SI), Z18, Z6
	VADDPS Z6, Z2, Z2
	VMULPS 192(SI), Z19, Z7
	VADDPS Z7, Z3, Z3
	VMULPS 256(SI), Z20, Z4
	VADDPS Z4, Z0, Z0
	VMULPS 320(SI), Z21, Z5
	VADDPS Z5, Z1, Z1
	VMULPS 384(SI), Z22, Z6
	VADDPS Z6, Z2, Z2
	VMULPS 448(SI), Z23, Z7
	VADDPS Z7, Z3, Z3
	VMULPS 512(SI), Z24, Z4
	VADDPS Z4, Z0, Z0
	VMULPS 576(SI), Z25, Z5
	VADDPS Z5, Z1, Z1
	VMULPS 640(SI), Z26, Z6
	VADDPS Z6, Z2, Z2
	VMULPS 704(SI), Z27, Z7
	VADDPS Z7, Z3, Z3
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ $256, SI
	ADDQ BX, DI
	DECQ CX
	JNZ  cb4loop

cb4done:
	VZEROUPPER
	RET
