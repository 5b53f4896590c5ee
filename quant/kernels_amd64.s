//go:build amd64 && !purego

#include "textflag.h"

// AVX2+FMA kernels over packed integer and fp8 bytes. The activations come
// widened to float64 (once per call, exactly), so the inner loops only decode
// weights and multiply-add. Each keeps the lane
// partition and reduction tree of its pure-Go twin in kernels_go.go exactly:
// every product of a decoded weight with a float32 is exact in float64, so
// fusing it into the add (VFMADD231PD) changes nothing, and only the order of
// the additions matters. X15 is left alone (ABIInternal's zero register).

// func r16Int8AVX2(q *byte, xw *float64, n int) float64
// n > 0 and n % 16 == 0. Returns the R16 tree of the 16 lanes (no tail).
TEXT ·r16Int8AVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), SI
	MOVQ xw+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPD Y8, Y8, Y8   // lanes 0-3
	VXORPD Y9, Y9, Y9   // lanes 4-7
	VXORPD Y10, Y10, Y10 // lanes 8-11
	VXORPD Y11, Y11, Y11 // lanes 12-15

i8loop:
	VPMOVSXBD (SI), X0
	VPMOVSXBD 4(SI), X1
	VPMOVSXBD 8(SI), X2
	VPMOVSXBD 12(SI), X3
	VCVTDQ2PD X0, Y0
	VCVTDQ2PD X1, Y1
	VCVTDQ2PD X2, Y2
	VCVTDQ2PD X3, Y3
	VFMADD231PD (DI), Y0, Y8
	VFMADD231PD 32(DI), Y1, Y9
	VFMADD231PD 64(DI), Y2, Y10
	VFMADD231PD 96(DI), Y3, Y11
	ADDQ $16, SI
	ADDQ $128, DI
	SUBQ $16, CX
	JNZ  i8loop

	// c_l = (a[l]+a[l+4]) + (a[l+8]+a[l+12]); (c0+c1) + (c2+c3).
	VADDPD       Y9, Y8, Y8
	VADDPD       Y11, Y10, Y10
	VADDPD       Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VHADDPD      X9, X8, X8
	VHADDPD      X8, X8, X8
	VZEROUPPER
	MOVSD        X8, ret+24(FP)
	RET

// func r16Int4AVX2(q *byte, xw *float64, n int) float64
// Offset-8 nibbles, even element in the low nibble. n > 0, n % 16 == 0.
TEXT ·r16Int4AVX2(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), SI
	MOVQ xw+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ $0x0f0f0f0f0f0f0f0f, AX
	VMOVQ AX, X14
	VPBROADCASTQ X14, X14 // nibble mask
	MOVQ $0x0808080808080808, AX
	VMOVQ AX, X13
	VPBROADCASTQ X13, X13 // offset 8
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11

i4loop:
	VMOVQ       (SI), X0
	VPSRLW      $4, X0, X1
	VPAND       X14, X0, X0
	VPAND       X14, X1, X1
	VPUNPCKLBW  X1, X0, X0   // elements 0..15 in order, as bytes
	VPSUBB      X13, X0, X0  // nibble − 8
	VPMOVSXBD   X0, Y1       // elements 0-7 as int32
	VPSRLDQ     $8, X0, X0
	VPMOVSXBD   X0, Y2       // elements 8-15
	VCVTDQ2PD   X1, Y3
	VEXTRACTI128 $1, Y1, X1
	VCVTDQ2PD   X1, Y4
	VCVTDQ2PD   X2, Y5
	VEXTRACTI128 $1, Y2, X2
	VCVTDQ2PD   X2, Y6
	VFMADD231PD (DI), Y3, Y8
	VFMADD231PD 32(DI), Y4, Y9
	VFMADD231PD 64(DI), Y5, Y10
	VFMADD231PD 96(DI), Y6, Y11
	ADDQ        $8, SI
	ADDQ        $128, DI
	SUBQ        $16, CX
	JNZ         i4loop

	VADDPD       Y9, Y8, Y8
	VADDPD       Y11, Y10, Y10
	VADDPD       Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VHADDPD      X9, X8, X8
	VHADDPD      X8, X8, X8
	VZEROUPPER
	MOVSD        X8, ret+24(FP)
	RET

// func rgInt4AVX2(q *byte, xw *float64, scales *byte, gs, ng int) float64
// ng > 0 full groups of gs offset-8 nibbles (gs % 8 == 0, gs > 0), F32
// scales. Returns acc = Σ_g sub_g·scale_g with RG sub-sums, in group order.
TEXT ·rgInt4AVX2(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ xw+8(FP), DI
	MOVQ scales+16(FP), DX
	MOVQ gs+24(FP), R8
	MOVQ ng+32(FP), BX
	MOVQ $0x0f0f0f0f0f0f0f0f, AX
	VMOVQ AX, X14
	VPBROADCASTQ X14, X14
	MOVQ $0x0808080808080808, AX
	VMOVQ AX, X13
	VPBROADCASTQ X13, X13
	VXORPD X12, X12, X12 // acc

g4group:
	VXORPD Y8, Y8, Y8 // lanes 0-3
	VXORPD Y9, Y9, Y9 // lanes 4-7
	MOVQ   R8, CX

g4loop:
	VMOVD        (SI), X0
	VPSRLW       $4, X0, X1
	VPAND        X14, X0, X0
	VPAND        X14, X1, X1
	VPUNPCKLBW   X1, X0, X0
	VPSUBB       X13, X0, X0
	VPMOVSXBD    X0, Y1
	VCVTDQ2PD    X1, Y3
	VEXTRACTI128 $1, Y1, X1
	VCVTDQ2PD    X1, Y4
	VFMADD231PD  (DI), Y3, Y8
	VFMADD231PD  32(DI), Y4, Y9
	ADDQ         $4, SI
	ADDQ         $64, DI
	SUBQ         $8, CX
	JNZ          g4loop

	// ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)), then acc += sub·scale with a
	// separate multiply and add (the rounded product must not fuse).
	VADDPD       Y9, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VHADDPD      X9, X8, X8
	VHADDPD      X8, X8, X8
	VCVTSS2SD    (DX), X10, X10
	VMULSD       X10, X8, X8
	VADDSD       X8, X12, X12
	ADDQ         $4, DX
	DECQ         BX
	JNZ          g4group

	VZEROUPPER
	MOVSD X12, ret+40(FP)
	RET

// func rgFP8AVX2(q *byte, xw *float64, scales *byte, ng int) float64
// ng > 0 full groups of 128 E4M3 bytes; scales holds ng F32 values.
// E4M3 → float32 without a table and without float32 subnormals (which
// would cost a microcode assist per conversion): with v the low seven bits,
// the bits v<<20 + 120<<23 are the float32 (1 + m/8)·2^(e−7), exact for
// e ≥ 1. A subnormal code (e = 0) is built as if e were 1, and 2^−6 (the
// implicit one it must not have) is subtracted, exactly: m/8·2^−6. Then the
// sign is ORed in (so 0x80 gives −0), and v = 0x7F (NaN) becomes the
// all-ones pattern, a NaN. The float32 values widen exactly to float64.
TEXT ·rgFP8AVX2(SB), NOSPLIT, $0-40
	MOVQ q+0(FP), SI
	MOVQ xw+8(FP), DI
	MOVQ scales+16(FP), DX
	MOVQ ng+24(FP), BX
	MOVL $0x7f, AX
	VMOVQ AX, X13
	VPBROADCASTD X13, Y13 // magnitude mask, NaN code
	MOVL $0x78, AX
	VMOVQ AX, X12
	VPBROADCASTD X12, Y12 // exponent field
	MOVL $0x3c000000, AX  // 120<<23: exponent rebias; also 2^−7 as float32 bits
	VMOVQ AX, X11
	VPBROADCASTD X11, Y11
	MOVL $0x00800000, AX  // 1<<23: exponent one
	VMOVQ AX, X10
	VPBROADCASTD X10, Y10
	MOVL $0x3c800000, AX  // 2^−6 as float32 bits
	VMOVQ AX, X7
	VPBROADCASTD X7, Y7
	MOVL $0x80000000, AX
	VMOVQ AX, X6
	VPBROADCASTD X6, Y6 // float32 sign bit
	VXORPD X14, X14, X14 // acc

f8group:
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	MOVQ   $128, CX

f8loop:
	VPMOVZXBD    (SI), Y0      // bytes b
	VPAND        Y13, Y0, Y1   // v = b & 0x7f
	VPCMPEQD     Y13, Y1, Y2   // NaN mask
	VPAND        Y12, Y1, Y3   // v & 0x78
	VPXOR        Y4, Y4, Y4
	VPCMPEQD     Y4, Y3, Y3    // subnormal-or-zero mask
	VPSLLD       $20, Y1, Y1
	VPADDD       Y11, Y1, Y1   // rebias the exponent
	VPAND        Y10, Y3, Y4
	VPADDD       Y4, Y1, Y1    // e = 0 → e = 1
	VPAND        Y7, Y3, Y4    // 2^−6 where e = 0, else +0
	VSUBPS       Y4, Y1, Y1    // drop the implicit one (exact)
	VPSLLD       $24, Y0, Y0
	VPAND        Y6, Y0, Y0    // sign
	VPOR         Y0, Y1, Y1
	VPOR         Y2, Y1, Y1    // NaN → all ones
	VCVTPS2PD    X1, Y3
	VEXTRACTI128 $1, Y1, X1
	VCVTPS2PD    X1, Y4
	VFMADD231PD  (DI), Y3, Y8
	VFMADD231PD  32(DI), Y4, Y9
	ADDQ         $8, SI
	ADDQ         $64, DI
	SUBQ         $8, CX
	JNZ          f8loop

	VADDPD       Y9, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VHADDPD      X9, X8, X8
	VHADDPD      X8, X8, X8
	VCVTSS2SD    (DX), X5, X5
	VMULSD       X5, X8, X8
	VADDSD       X8, X14, X14
	ADDQ         $4, DX
	DECQ         BX
	JNZ          f8group

	VZEROUPPER
	MOVSD X14, ret+32(FP)
	RET
