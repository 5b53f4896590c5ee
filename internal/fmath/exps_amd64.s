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

// func exp64AVX512(dst, x *float64, n int) int
//
// Eight lanes of Exp64 for arguments in range, each step the same IEEE
// operation as the scalar code: t = log2e·x; k = trunc(t ± 0.5) (the half
// carrying x's sign, as Exp64 adds −0.5 for x < 0; for x = −0 it gives
// k = 0 as well); hi = x − fk·ln2Hi; lo = fk·ln2Lo; then expReduced: r = hi
// − lo, t = r·r, Horner with a multiply then an add (never fused), c = r −
// t·p, y = 1 − ((lo − (r·c)/(2 − c)) − hi), and y·2^k with 2^k built from its
// exponent bits (k ∈ [−1021, 1021] here, scale2's plain case).
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

	VMULPD.BCST    expLog2e<>(SB), Z0, Z2
	VANDPD.BCST    expSign<>(SB), Z0, Z3
	VORPD.BCST     expHalf<>(SB), Z3, Z3
	VADDPD         Z3, Z2, Z2
	VCVTTPD2QQ     Z2, Z4
	VCVTQQ2PD      Z4, Z5
	VMULPD.BCST    expLn2Hi<>(SB), Z5, Z6
	VSUBPD         Z6, Z0, Z6 // hi
	VMULPD.BCST    expLn2Lo<>(SB), Z5, Z7 // lo
	VSUBPD         Z7, Z6, Z8 // r
	VMULPD         Z8, Z8, Z9 // t
	VBROADCASTSD   expP5<>(SB), Z10
	VMULPD         Z10, Z9, Z10
	VADDPD.BCST    expP4<>(SB), Z10, Z10
	VMULPD         Z10, Z9, Z10
	VADDPD.BCST    expP3<>(SB), Z10, Z10
	VMULPD         Z10, Z9, Z10
	VADDPD.BCST    expP2<>(SB), Z10, Z10
	VMULPD         Z10, Z9, Z10
	VADDPD.BCST    expP1<>(SB), Z10, Z10
	VMULPD         Z10, Z9, Z10 // t·p
	VSUBPD         Z10, Z8, Z11 // c
	VMULPD         Z11, Z8, Z12 // r·c
	VSUBPD         Z11, Z31, Z13 // 2 − c
	VDIVPD         Z13, Z12, Z12
	VSUBPD         Z12, Z7, Z12 // lo − r·c/(2−c)
	VSUBPD         Z6, Z12, Z12 // … − hi
	VSUBPD         Z12, Z30, Z14 // y
	VPADDQ.BCST    expBias<>(SB), Z4, Z4
	VPSLLQ         $52, Z4, Z4
	VMULPD         Z4, Z14, Z14
	VMOVUPD        Z14, (DI)(AX*8)
	ADDQ           $8, AX
	JMP            loop

done:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET
