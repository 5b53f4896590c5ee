//go:build amd64 && !purego

#include "textflag.h"

// The constants of Exp64 (exp.go), as float64 bit patterns.
DATA expLog2e<>+0(SB)/8, $0x3ff71547652b82fe
GLOBL expLog2e<>(SB), RODATA|NOPTR, $8
DATA expLn2Hi<>+0(SB)/8, $0x3fe62e42fee00000
GLOBL expLn2Hi<>(SB), RODATA|NOPTR, $8
DATA expLn2Lo<>+0(SB)/8, $0x3dea39ef35793c76
GLOBL expLn2Lo<>(SB), RODATA|NOPTR, $8
DATA expP1<>+0(SB)/8, $0x3fc5555555555555
GLOBL expP1<>(SB), RODATA|NOPTR, $8
DATA expP2<>+0(SB)/8, $0xbf66c16c16bebd93
GLOBL expP2<>(SB), RODATA|NOPTR, $8
DATA expP3<>+0(SB)/8, $0x3f11566aaf25de2c
GLOBL expP3<>(SB), RODATA|NOPTR, $8
DATA expP4<>+0(SB)/8, $0xbebbbd41c5d26bf1
GLOBL expP4<>(SB), RODATA|NOPTR, $8
DATA expP5<>+0(SB)/8, $0x3e66376972bea4d0
GLOBL expP5<>(SB), RODATA|NOPTR, $8
DATA expHalf<>+0(SB)/8, $0x3fe0000000000000
GLOBL expHalf<>(SB), RODATA|NOPTR, $8
DATA expOne<>+0(SB)/8, $0x3ff0000000000000
GLOBL expOne<>(SB), RODATA|NOPTR, $8
DATA expTwo<>+0(SB)/8, $0x4000000000000000
GLOBL expTwo<>(SB), RODATA|NOPTR, $8
DATA expSign<>+0(SB)/8, $0x8000000000000000
GLOBL expSign<>(SB), RODATA|NOPTR, $8
DATA expAbs<>+0(SB)/8, $0x7fffffffffffffff
GLOBL expAbs<>(SB), RODATA|NOPTR, $8
// The kernel's range: 2^−28 ≤ |x| ≤ 708 (or x = ±0). Below, Exp64 returns
// 1 + x; above, k may leave [−1022, 1023] and scale2 rounds differently.
DATA expTiny<>+0(SB)/8, $0x3e30000000000000
GLOBL expTiny<>(SB), RODATA|NOPTR, $8
DATA expLimit<>+0(SB)/8, $0x4086200000000000
GLOBL expLimit<>(SB), RODATA|NOPTR, $8
DATA expZero<>+0(SB)/8, $0
GLOBL expZero<>(SB), RODATA|NOPTR, $8
DATA expBias<>+0(SB)/8, $1023
GLOBL expBias<>(SB), RODATA|NOPTR, $8

// EXPCORE sets Z14 = Exp64(Z0) lane by lane for arguments in the kernel's
// range, with Z30 = 1 and Z31 = 2; it clobbers Z2–Z13. Each step is the same
// IEEE operation as the scalar code: t = log2e·x; k = trunc(t ± 0.5) (the
// half carrying x's sign, as Exp64 adds −0.5 for x < 0; for x = −0 it gives
// k = 0 as well); hi = x − fk·ln2Hi; lo = fk·ln2Lo; then expReduced: r = hi
// − lo, t = r·r, Horner with a multiply then an add (never fused), c = r −
// t·p, y = 1 − ((lo − (r·c)/(2 − c)) − hi), and y·2^k with 2^k built from its
// exponent bits (k ∈ [−1021, 1021] in range, scale2's plain case).
#define EXPCORE \
	VMULPD.BCST    expLog2e<>(SB), Z0, Z2 \
	VANDPD.BCST    expSign<>(SB), Z0, Z3 \
	VORPD.BCST     expHalf<>(SB), Z3, Z3 \
	VADDPD         Z3, Z2, Z2 \
	VCVTTPD2QQ     Z2, Z4 \
	VCVTQQ2PD      Z4, Z5 \
	VMULPD.BCST    expLn2Hi<>(SB), Z5, Z6 \
	VSUBPD         Z6, Z0, Z6 \
	VMULPD.BCST    expLn2Lo<>(SB), Z5, Z7 \
	VSUBPD         Z7, Z6, Z8 \
	VMULPD         Z8, Z8, Z9 \
	VBROADCASTSD   expP5<>(SB), Z10 \
	VMULPD         Z10, Z9, Z10 \
	VADDPD.BCST    expP4<>(SB), Z10, Z10 \
	VMULPD         Z10, Z9, Z10 \
	VADDPD.BCST    expP3<>(SB), Z10, Z10 \
	VMULPD         Z10, Z9, Z10 \
	VADDPD.BCST    expP2<>(SB), Z10, Z10 \
	VMULPD         Z10, Z9, Z10 \
	VADDPD.BCST    expP1<>(SB), Z10, Z10 \
	VMULPD         Z10, Z9, Z10 \
	VSUBPD         Z10, Z8, Z11 \
	VMULPD         Z11, Z8, Z12 \
	VSUBPD         Z11, Z31, Z13 \
	VDIVPD         Z13, Z12, Z12 \
	VSUBPD         Z12, Z7, Z12 \
	VSUBPD         Z6, Z12, Z12 \
	VSUBPD         Z12, Z30, Z14 \
	VPADDQ.BCST    expBias<>(SB), Z4, Z4 \
	VPSLLQ         $52, Z4, Z4 \
	VMULPD         Z4, Z14, Z14

// func exp64AVX512(dst, x *float64, n int) int
//
// Eight lanes of Exp64 at a time while every lane is in range.
TEXT ·exp64AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	VBROADCASTSD expOne<>(SB), Z30
	VBROADCASTSD expTwo<>(SB), Z31

loop:
	CMPQ AX, CX
	JGE  done
	VMOVUPD (SI)(AX*8), Z0

	// In range: (tiny ≤ |x| ≤ limit) or x = ±0; NaN fails every compare.
	VANDPD.BCST    expAbs<>(SB), Z0, Z1
	VCMPPD.BCST    $0x1d, expTiny<>(SB), Z1, K1
	VCMPPD.BCST    $0x12, expLimit<>(SB), Z1, K1, K1
	VCMPPD.BCST    $0x00, expZero<>(SB), Z0, K2
	KORW           K1, K2, K1
	KMOVW          K1, BX
	CMPL           BX, $0xff
	JNE            done

	EXPCORE
	VMOVUPD        Z14, (DI)(AX*8)
	ADDQ           $8, AX
	JMP            loop

done:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

// EXPCORE2 is EXPCORE on four lanes for AVX2 (ymm, no AVX-512): Y1 =
// Exp64(Y0) with Y15 = 1 and Y14 = 2, clobbering Y2–Y13. Without AVX-512 DQ
// there is no float64↔int64 conversion, but k fits an int32 in the kernel's
// range (|k| ≤ 1022), so k is truncated to int32 (VCVTTPD2DQ, which rounds
// toward zero as Go's int conversion does), widened back exactly, and
// sign-extended to int64 for 2^k's exponent bits. Every other step is the
// same IEEE operation as in EXPCORE, in the same order.
#define EXPCORE2 \
	VBROADCASTSD expLog2e<>(SB), Y2 \
	VMULPD       Y2, Y0, Y2 \
	VBROADCASTSD expSign<>(SB), Y3 \
	VANDPD       Y3, Y0, Y3 \
	VBROADCASTSD expHalf<>(SB), Y4 \
	VORPD        Y4, Y3, Y3 \
	VADDPD       Y3, Y2, Y2 \
	VCVTTPD2DQY  Y2, X4 \
	VCVTDQ2PD    X4, Y5 \
	VBROADCASTSD expLn2Hi<>(SB), Y6 \
	VMULPD       Y6, Y5, Y6 \
	VSUBPD       Y6, Y0, Y6 \
	VBROADCASTSD expLn2Lo<>(SB), Y7 \
	VMULPD       Y7, Y5, Y7 \
	VSUBPD       Y7, Y6, Y8 \
	VMULPD       Y8, Y8, Y9 \
	VBROADCASTSD expP5<>(SB), Y10 \
	VMULPD       Y10, Y9, Y10 \
	VBROADCASTSD expP4<>(SB), Y11 \
	VADDPD       Y11, Y10, Y10 \
	VMULPD       Y10, Y9, Y10 \
	VBROADCASTSD expP3<>(SB), Y11 \
	VADDPD       Y11, Y10, Y10 \
	VMULPD       Y10, Y9, Y10 \
	VBROADCASTSD expP2<>(SB), Y11 \
	VADDPD       Y11, Y10, Y10 \
	VMULPD       Y10, Y9, Y10 \
	VBROADCASTSD expP1<>(SB), Y11 \
	VADDPD       Y11, Y10, Y10 \
	VMULPD       Y10, Y9, Y10 \
	VSUBPD       Y10, Y8, Y11 \
	VMULPD       Y11, Y8, Y12 \
	VSUBPD       Y11, Y14, Y13 \
	VDIVPD       Y13, Y12, Y12 \
	VSUBPD       Y12, Y7, Y12 \
	VSUBPD       Y6, Y12, Y12 \
	VSUBPD       Y12, Y15, Y1 \
	VPMOVSXDQ    X4, Y4 \
	VPBROADCASTQ expBias<>(SB), Y13 \
	VPADDQ       Y13, Y4, Y4 \
	VPSLLQ       $52, Y4, Y4 \
	VMULPD       Y4, Y1, Y1

// func exp64AVX2(dst, x *float64, n int) int
//
// Four lanes of Exp64 at a time while every lane is in range (the range of
// exp64AVX512).
TEXT ·exp64AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	VBROADCASTSD expOne<>(SB), Y15
	VBROADCASTSD expTwo<>(SB), Y14

loop2:
	CMPQ AX, CX
	JGE  done2
	VMOVUPD (SI)(AX*8), Y0

	// In range: (tiny ≤ |x| ≤ limit) or x = ±0; NaN fails every compare.
	VBROADCASTSD expAbs<>(SB), Y1
	VANDPD       Y1, Y0, Y1
	VBROADCASTSD expTiny<>(SB), Y2
	VCMPPD       $0x1d, Y2, Y1, Y2
	VBROADCASTSD expLimit<>(SB), Y3
	VCMPPD       $0x12, Y3, Y1, Y3
	VANDPD       Y3, Y2, Y2
	VXORPD       Y3, Y3, Y3
	VCMPPD       $0x00, Y3, Y0, Y3
	VORPD        Y3, Y2, Y2
	VMOVMSKPD    Y2, BX
	CMPL         BX, $0xf
	JNE          done2

	EXPCORE2
	VMOVUPD Y1, (DI)(AX*8)
	ADDQ    $4, AX
	JMP     loop2

done2:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

// The constants of Tanh64 (tanh.go).
DATA tanhP0<>+0(SB)/8, $0xbfeedc5baafd6f4b
GLOBL tanhP0<>(SB), RODATA|NOPTR, $8
DATA tanhP1<>+0(SB)/8, $0xc058d26a0e26682d
GLOBL tanhP1<>(SB), RODATA|NOPTR, $8
DATA tanhP2<>+0(SB)/8, $0xc0993ac030580563
GLOBL tanhP2<>(SB), RODATA|NOPTR, $8
DATA tanhQ0<>+0(SB)/8, $0x405c33f28a581b86
GLOBL tanhQ0<>(SB), RODATA|NOPTR, $8
DATA tanhQ1<>+0(SB)/8, $0x40a176fa0e5535fa
GLOBL tanhQ1<>(SB), RODATA|NOPTR, $8
DATA tanhQ2<>+0(SB)/8, $0x40b2ec102442040c
GLOBL tanhQ2<>(SB), RODATA|NOPTR, $8
DATA tanhSmall<>+0(SB)/8, $0x3fe4000000000000
GLOBL tanhSmall<>(SB), RODATA|NOPTR, $8
DATA tanhSat<>+0(SB)/8, $0x404601e678fc457b
GLOBL tanhSat<>(SB), RODATA|NOPTR, $8
DATA tanhSplit<>+0(SB)/8, $0x41a0000002000000
GLOBL tanhSplit<>(SB), RODATA|NOPTR, $8

// func tanh64AVX512(dst, x *float64, n int)
//
// dst[i] = Tanh64(x[i]) for i < n, a multiple of 8. The costly paths run
// only on the lanes that take them: a block of eight arguments mixes both
// sides of 0.625 more often than not (SiTU-GLU's g/β1), and computing
// tanhMid and the rational form for all eight lanes spent three of the four
// divisions on lanes that discard them. Per chunk of at most 64 arguments,
// a first pass finishes every lane but tanhMid's (±1 beyond tanhSat, x for
// NaN and ±0, else the rational form, skipped for a block with no such
// lane) and packs tanhMid's arguments in order into the frame, marking each
// block's lanes; a second evaluates them eight at a time and a third puts
// each result back in its lane. The arithmetic of every lane is the scalar
// code's.
TEXT ·tanh64AVX512(SB), $520-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), R10
	LEAQ 0(SP), R8   // packed tanhMid arguments, then results
	LEAQ 512(SP), R9 // a mask byte per block
	VBROADCASTSD expOne<>(SB), Z30
	VBROADCASTSD expTwo<>(SB), Z31

tchunk:
	TESTQ R10, R10
	JZ    tdone
	MOVQ  $64, CX
	CMPQ  R10, CX
	CMOVQLT R10, CX
	XORQ  AX, AX
	XORQ  DX, DX
	MOVQ  R9, R11

tsplit:
	VMOVUPD (SI)(AX*8), Z15
	VANDPD.BCST expAbs<>(SB), Z15, Z16 // a
	VANDPD.BCST expSign<>(SB), Z15, Z24 // x's sign bit
	VCMPPD      $0x03, Z15, Z15, K1 // NaN
	VCMPPD.BCST $0x1e, tanhSat<>(SB), Z16, K2 // a > sat
	VCMPPD.BCST $0x1d, tanhSmall<>(SB), Z16, K3 // a ≥ 0.625
	VCMPPD.BCST $0x00, expZero<>(SB), Z15, K4 // x = ±0
	KANDNW      K3, K2, K5 // tanhMid's lanes
	KMOVB       K5, BX
	MOVB        BX, (R11)
	INCQ        R11
	TESTL       BX, BX
	JZ          trational
	VCOMPRESSPD Z15, K5, Z17
	VMOVUPD     Z17, (R8)(DX*8)
	POPCNTL     BX, BX
	ADDQ        BX, DX

trational:
	// The rational form: x + ((x·s)·num)/den, s = x², unless no lane
	// takes it.
	VMOVAPD     Z15, Z28
	KORW        K3, K1, K6
	KORW        K6, K4, K6
	KORTESTB    K6, K6
	JCS         tblend
	VMULPD      Z15, Z15, Z25 // s
	VMULPD.BCST tanhP0<>(SB), Z25, Z26
	VADDPD.BCST tanhP1<>(SB), Z26, Z26
	VMULPD      Z25, Z26, Z26
	VADDPD.BCST tanhP2<>(SB), Z26, Z26 // num
	VADDPD.BCST tanhQ0<>(SB), Z25, Z27
	VMULPD      Z25, Z27, Z27
	VADDPD.BCST tanhQ1<>(SB), Z27, Z27
	VMULPD      Z25, Z27, Z27
	VADDPD.BCST tanhQ2<>(SB), Z27, Z27 // den
	VMULPD      Z25, Z15, Z28
	VMULPD      Z26, Z28, Z28
	VDIVPD      Z27, Z28, Z28
	VADDPD      Z28, Z15, Z28

tblend:
	VORPD       Z24, Z30, Z23
	VMOVAPD     Z23, K2, Z28 // ±1
	KORW        K1, K4, K1
	VMOVAPD     Z15, K1, Z28 // NaN, ±0: x
	VMOVUPD     Z28, (DI)(AX*8)
	ADDQ        $8, AX
	CMPQ        AX, CX
	JLT         tsplit

	// tanhMid for the packed arguments (the lanes past DX in the last
	// block are left over from earlier blocks and not used).
	TESTQ DX, DX
	JZ    tadvance
	XORQ  R12, R12

tmid:
	CMPQ R12, DX
	JGE  tput
	VMOVUPD (R8)(R12*8), Z15
	VANDPD.BCST expAbs<>(SB), Z15, Z16 // a
	VANDPD.BCST expSign<>(SB), Z15, Z24 // x's sign bit

	// m = Exp64(−(a + a)): every argument packed here is in EXPCORE's
	// range. Then tanhMid(a) = q + corr, each step the scalar statement's
	// IEEE operation (Fast2Sum, Dekker's split and product with separate
	// multiplies and adds).
	VADDPD      Z16, Z16, Z0
	VXORPD.BCST expSign<>(SB), Z0, Z0
	EXPCORE
	VSUBPD      Z14, Z30, Z17 // n = 1 − m
	VSUBPD      Z17, Z30, Z18
	VSUBPD      Z14, Z18, Z18 // nlo = (1 − n) − m
	VADDPD      Z14, Z30, Z19 // d = 1 + m
	VSUBPD      Z30, Z19, Z20
	VSUBPD      Z20, Z14, Z20 // dlo = m − (d − 1)
	VDIVPD      Z19, Z17, Z21 // q = n / d
	VMULPD      Z19, Z21, Z22 // ph = q·d
	VMULPD.BCST tanhSplit<>(SB), Z21, Z23
	VSUBPD      Z21, Z23, Z25
	VSUBPD      Z25, Z23, Z25 // qh
	VSUBPD      Z25, Z21, Z26 // ql = q − qh
	VMULPD.BCST tanhSplit<>(SB), Z19, Z23
	VSUBPD      Z19, Z23, Z27
	VSUBPD      Z27, Z23, Z27 // dh
	VSUBPD      Z27, Z19, Z28 // dl = d − dh
	VMULPD      Z27, Z25, Z29
	VSUBPD      Z22, Z29, Z29 // e = qh·dh − ph
	VMULPD      Z28, Z25, Z23
	VADDPD      Z23, Z29, Z29 // e += qh·dl
	VMULPD      Z27, Z26, Z23
	VADDPD      Z23, Z29, Z29 // e += ql·dh
	VMULPD      Z28, Z26, Z23
	VADDPD      Z23, Z29, Z29 // e += ql·dl: pl
	VSUBPD      Z22, Z17, Z23
	VSUBPD      Z29, Z23, Z23 // r = (n − ph) − pl
	VADDPD      Z18, Z23, Z23 // r + nlo
	VMULPD      Z20, Z21, Z25
	VSUBPD      Z25, Z23, Z23 // … − q·dlo
	VDIVPD      Z19, Z23, Z23 // corr
	VADDPD      Z23, Z21, Z23 // q + corr
	VORPD       Z24, Z23, Z23 // with x's sign (it is positive)
	VMOVUPD Z23, (R8)(R12*8)
	ADDQ $8, R12
	JMP  tmid

tput:
	// Block b's marked lanes take the next popcount(mask b) results.
	MOVQ R9, R11
	MOVQ DI, R14
	MOVQ CX, R13
	SHRQ $3, R13
	XORQ R12, R12

tblock:
	MOVBLZX (R11), BX
	TESTL   BX, BX
	JZ      tnext
	KMOVB   BX, K1
	VEXPANDPD (R8)(R12*8), K1, Z1
	VMOVUPD   Z1, K1, (R14)
	POPCNTL BX, BX
	ADDQ    BX, R12

tnext:
	INCQ R11
	ADDQ $64, R14
	DECQ R13
	JNZ  tblock

tadvance:
	LEAQ (SI)(CX*8), SI
	LEAQ (DI)(CX*8), DI
	SUBQ CX, R10
	JMP  tchunk

tdone:
	VZEROUPPER
	RET

// The float32 ends of the slice forms, sixteen elements per step (n a
// multiple of 16), each instruction the scalar statement's rounding.

// func widen32(dst *float64, x *float32, n int, neg bool)
//
// dst[i] = f64(x[i]), negated when neg is set (an exact sign flip).
TEXT ·widen32(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VPXORQ Z2, Z2, Z2
	CMPB neg+24(FP), $0
	JEQ  w32loop
	MOVQ $0x8000000000000000, AX
	VPBROADCASTQ AX, Z2

w32loop:
	VCVTPS2PD 0(SI), Z0
	VCVTPS2PD 32(SI), Z1
	VPXORQ    Z2, Z0, Z0
	VPXORQ    Z2, Z1, Z1
	VMOVUPD   Z0, 0(DI)
	VMOVUPD   Z1, 64(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $16, CX
	JNZ  w32loop
	VZEROUPPER
	RET

// func narrow32(dst *float32, e *float64, n int, sigmoid bool)
//
// dst[i] = f32(e[i]), or 1 ⊘ (1 ⊕ f32(e[i])) when sigmoid is set.
TEXT ·narrow32(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ e+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x3f800000, AX
	VPBROADCASTD AX, Z3
	CMPB sigmoid+24(FP), $0
	JNE  n32sig

n32loop:
	VCVTPD2PS 0(SI), Y0
	VCVTPD2PS 64(SI), Y1
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  n32loop
	VZEROUPPER
	RET

n32sig:
	VCVTPD2PS 0(SI), Y0
	VCVTPD2PS 64(SI), Y1
	VINSERTF32X8 $1, Y1, Z0, Z0
	VADDPS    Z0, Z3, Z0
	VDIVPS    Z0, Z3, Z0
	VMOVUPS   Z0, 0(DI)
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  n32sig
	VZEROUPPER
	RET

DATA tanhMidArg<>+0(SB)/8, $0xbff4000000000000
GLOBL tanhMidArg<>(SB), RODATA|NOPTR, $8

// func tanh64AVX2(dst, x *float64, n int)
//
// dst[i] = Tanh64(x[i]) for i < n, a multiple of 4, on AVX2. Four lanes are
// too few to pay for tanh64AVX512's packing of the tanhMid lanes, so every
// lane computes both the rational form and tanhMid (its exp argument set to
// -1.25, inside EXPCORE2's range, where it is not tanhMid's lane) and the
// lane's own path is blended in: rational, then tanhMid with x's sign, then
// ±1 beyond tanhSat, then x itself for ±0 and NaN — the order in which
// Tanh64 tests them, each step the scalar code's operation. The frame keeps
// x (0), |x| (32) and the tanhMid mask (64) across EXPCORE2.
TEXT ·tanh64AVX2(SB), NOSPLIT, $96-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	VBROADCASTSD expOne<>(SB), Y15
	VBROADCASTSD expTwo<>(SB), Y14

tloop2:
	CMPQ AX, CX
	JGE  tdone2
	VMOVUPD      (SI)(AX*8), Y0
	VMOVUPD      Y0, 0(SP)
	VBROADCASTSD expAbs<>(SB), Y1
	VANDPD       Y1, Y0, Y1
	VMOVUPD      Y1, 32(SP)
	VBROADCASTSD tanhSmall<>(SB), Y2
	VCMPPD       $0x1d, Y2, Y1, Y3
	VBROADCASTSD tanhSat<>(SB), Y2
	VCMPPD       $0x12, Y2, Y1, Y4
	VANDPD       Y4, Y3, Y3
	VMOVUPD      Y3, 64(SP)
	VMOVMSKPD    Y3, BX
	TESTL        BX, BX
	JZ           tsign2 // no tanhMid lane: its result is never blended in

	// m = Exp64(−(a+a)) on the tanhMid lanes.
	VADDPD       Y1, Y1, Y2
	VBROADCASTSD expSign<>(SB), Y4
	VXORPD       Y4, Y2, Y2
	VBROADCASTSD tanhMidArg<>(SB), Y4
	VBLENDVPD    Y3, Y2, Y4, Y0
	EXPCORE2

	// tanhMid: n, nlo, d, dlo, q = n/d, then r = n − q·d exactly (twoProd
	// with Veltkamp splits) and q + (r + nlo − q·dlo)/d.
	VSUBPD       Y1, Y15, Y2
	VSUBPD       Y2, Y15, Y3
	VSUBPD       Y1, Y3, Y3
	VADDPD       Y1, Y15, Y4
	VSUBPD       Y15, Y4, Y5
	VSUBPD       Y5, Y1, Y5
	VDIVPD       Y4, Y2, Y6
	VMULPD       Y4, Y6, Y7
	VBROADCASTSD tanhSplit<>(SB), Y8
	VMULPD       Y6, Y8, Y9
	VSUBPD       Y6, Y9, Y10
	VSUBPD       Y10, Y9, Y10
	VSUBPD       Y10, Y6, Y11
	VMULPD       Y4, Y8, Y9
	VSUBPD       Y4, Y9, Y12
	VSUBPD       Y12, Y9, Y12
	VSUBPD       Y12, Y4, Y13
	VMULPD       Y12, Y10, Y8
	VSUBPD       Y7, Y8, Y8
	VMULPD       Y13, Y10, Y9
	VADDPD       Y9, Y8, Y8
	VMULPD       Y12, Y11, Y9
	VADDPD       Y9, Y8, Y8
	VMULPD       Y13, Y11, Y9
	VADDPD       Y9, Y8, Y8
	VSUBPD       Y7, Y2, Y9
	VSUBPD       Y8, Y9, Y9
	VADDPD       Y3, Y9, Y9
	VMULPD       Y5, Y6, Y10
	VSUBPD       Y10, Y9, Y9
	VDIVPD       Y4, Y9, Y9
	VADDPD       Y9, Y6, Y9

	// With x's sign (tanhMid is positive).
tsign2:
	VMOVUPD      0(SP), Y0
	VBROADCASTSD expSign<>(SB), Y1
	VANDPD       Y1, Y0, Y2
	VORPD        Y2, Y9, Y9

	// The rational form: x + (x·s)·num/den, s = x².
	VMULPD       Y0, Y0, Y3
	VBROADCASTSD tanhP0<>(SB), Y4
	VMULPD       Y3, Y4, Y4
	VBROADCASTSD tanhP1<>(SB), Y5
	VADDPD       Y5, Y4, Y4
	VMULPD       Y3, Y4, Y4
	VBROADCASTSD tanhP2<>(SB), Y5
	VADDPD       Y5, Y4, Y4
	VBROADCASTSD tanhQ0<>(SB), Y5
	VADDPD       Y5, Y3, Y5
	VMULPD       Y3, Y5, Y5
	VBROADCASTSD tanhQ1<>(SB), Y6
	VADDPD       Y6, Y5, Y5
	VMULPD       Y3, Y5, Y5
	VBROADCASTSD tanhQ2<>(SB), Y6
	VADDPD       Y6, Y5, Y5
	VMULPD       Y3, Y0, Y6
	VMULPD       Y4, Y6, Y6
	VDIVPD       Y5, Y6, Y6
	VADDPD       Y6, Y0, Y6

	// Each lane's path.
	VMOVUPD      64(SP), Y3
	VBLENDVPD    Y3, Y9, Y6, Y6
	VMOVUPD      32(SP), Y1
	VBROADCASTSD tanhSat<>(SB), Y4
	VCMPPD       $0x1e, Y4, Y1, Y4
	VORPD        Y2, Y15, Y5
	VBLENDVPD    Y4, Y5, Y6, Y6
	VXORPD       Y4, Y4, Y4
	VCMPPD       $0x00, Y4, Y0, Y4
	VCMPPD       $0x03, Y0, Y0, Y5
	VORPD        Y5, Y4, Y4
	VBLENDVPD    Y4, Y0, Y6, Y6
	VMOVUPD      Y6, (DI)(AX*8)
	ADDQ         $4, AX
	JMP          tloop2

tdone2:
	VZEROUPPER
	RET

// widen32AVX2 and narrow32AVX2 are widen32 and narrow32 in ymm registers.

// func widen32AVX2(dst *float64, x *float32, n int, neg bool)
TEXT ·widen32AVX2(SB), NOSPLIT, $0-25
	MOVQ   dst+0(FP), DI
	MOVQ   x+8(FP), SI
	MOVQ   n+16(FP), CX
	VXORPD Y4, Y4, Y4
	CMPB   neg+24(FP), $0
	JEQ    w32loop2
	VBROADCASTSD expSign<>(SB), Y4

w32loop2:
	VCVTPS2PD 0(SI), Y0
	VCVTPS2PD 16(SI), Y1
	VCVTPS2PD 32(SI), Y2
	VCVTPS2PD 48(SI), Y3
	VXORPD    Y4, Y0, Y0
	VXORPD    Y4, Y1, Y1
	VXORPD    Y4, Y2, Y2
	VXORPD    Y4, Y3, Y3
	VMOVUPD   Y0, 0(DI)
	VMOVUPD   Y1, 32(DI)
	VMOVUPD   Y2, 64(DI)
	VMOVUPD   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $16, CX
	JNZ       w32loop2
	VZEROUPPER
	RET

// func narrow32AVX2(dst *float32, e *float64, n int, sigmoid bool)
TEXT ·narrow32AVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ e+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x3f800000, AX
	VMOVD AX, X4
	VPBROADCASTD X4, Y4
	CMPB sigmoid+24(FP), $0
	JNE  n32sig2

n32loop2:
	VCVTPD2PSY 0(SI), X0
	VCVTPD2PSY 32(SI), X1
	VCVTPD2PSY 64(SI), X2
	VCVTPD2PSY 96(SI), X3
	VMOVUPS    X0, 0(DI)
	VMOVUPS    X1, 16(DI)
	VMOVUPS    X2, 32(DI)
	VMOVUPS    X3, 48(DI)
	ADDQ       $128, SI
	ADDQ       $64, DI
	SUBQ       $16, CX
	JNZ        n32loop2
	VZEROUPPER
	RET

n32sig2:
	VCVTPD2PSY  0(SI), X0
	VCVTPD2PSY  32(SI), X1
	VCVTPD2PSY  64(SI), X2
	VCVTPD2PSY  96(SI), X3
	VINSERTF128 $1, X1, Y0, Y0
	VINSERTF128 $1, X3, Y2, Y2
	VADDPS      Y0, Y4, Y0
	VADDPS      Y2, Y4, Y2
	VDIVPS      Y0, Y4, Y0
	VDIVPS      Y2, Y4, Y2
	VMOVUPS     Y0, 0(DI)
	VMOVUPS     Y2, 32(DI)
	ADDQ        $128, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JNZ         n32sig2
	VZEROUPPER
	RET
