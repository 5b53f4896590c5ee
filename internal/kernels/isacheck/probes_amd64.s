//go:build amd64 && !purego

#include "textflag.h"

// GATHER is the body of the gather probes, the offsets in IDX. (Macros stand
// before every TEXT: vet reads one defined after a TEXT as part of it.)
#define GATHER(IDX) \
	MOVQ dst+0(FP), DI; \
	MOVQ base+8(FP), SI; \
	MOVQ off+16(FP), DX; \
	MOVQ old+24(FP), CX; \
	KMOVB k+32(FP), K1; \
	VMOVDQU64 (DX), IDX; \
	VMOVDQU64 (CX), Z0; \
	VPGATHERQQ (SI)(IDX*1), K1, Z0; \
	VMOVDQU64 Z0, (DI); \
	VZEROUPPER

// func gf2p8affineqb0(dst, x, a *[64]byte)
TEXT ·gf2p8affineqb0(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ a+16(FP), DX
	VMOVDQU64 (SI), Z0
	VMOVDQU64 (DX), Z1
	VGF2P8AFFINEQB $0, Z1, Z0, Z2
	VMOVDQU64 Z2, (DI)
	VZEROUPPER
	RET

// func permi2bz(dst, idx, t1, t2 *[64]byte, k uint64)
TEXT ·permi2bz(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ idx+8(FP), SI
	MOVQ t1+16(FP), DX
	MOVQ t2+24(FP), CX
	KMOVQ k+32(FP), K2
	VMOVDQU64 (SI), Z0
	VMOVDQU64 (DX), Z1
	VMOVDQU64 (CX), Z2
	VPERMI2B.Z Z2, Z1, K2, Z0
	VMOVDQU64 Z0, (DI)
	VZEROUPPER
	RET

// func expandb(dst, src, old *[64]byte, k uint64)
TEXT ·expandb(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ old+16(FP), DX
	KMOVQ k+24(FP), K1
	VMOVDQU64 (DX), Z0
	VPEXPANDB (SI), K1, Z0
	VMOVDQU64 Z0, (DI)
	VZEROUPPER
	RET

// func ternlogd(dst *[3][64]byte, a, b, c *[64]byte)
TEXT ·ternlogd(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ c+24(FP), CX
	VMOVDQU64 (DX), Z1
	VMOVDQU64 (CX), Z2
	VMOVDQU64 (SI), Z0
	VPTERNLOGD $0xA8, Z2, Z1, Z0
	VMOVDQU64 Z0, (DI)
	VMOVDQU64 (SI), Z0
	VPTERNLOGD $0xE4, Z2, Z1, Z0
	VMOVDQU64 Z0, 64(DI)
	VMOVDQU64 (SI), Z0
	VPTERNLOGD $0xD8, Z2, Z1, Z0
	VMOVDQU64 Z0, 128(DI)
	VZEROUPPER
	RET

// func permt2q(dst *[2][8]uint64, idx, t1, t2 *[8]uint64)
TEXT ·permt2q(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ idx+8(FP), SI
	MOVQ t1+16(FP), DX
	MOVQ t2+24(FP), CX
	VMOVDQU64 (SI), Z0
	VMOVDQU64 (CX), Z1
	VMOVDQU64 (DX), Z3
	VPERMT2Q Z1, Z0, Z3
	VMOVDQU64 Z3, (DI)
	VMOVDQU64 (DX), Z3
	VPERMT2Q (CX), Z0, Z3
	VMOVDQU64 Z3, 64(DI)
	VZEROUPPER
	RET

// func compresspd(dst, src, old *[8]float64, k uint8)
TEXT ·compresspd(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ old+16(FP), DX
	KMOVB k+24(FP), K5
	VMOVUPD (SI), Z15
	VMOVUPD (DX), Z17
	VCOMPRESSPD Z15, K5, Z17
	VMOVUPD Z17, (DI)
	VZEROUPPER
	RET

// func expandpd(dst, src, old *[8]float64, k uint8)
TEXT ·expandpd(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ old+16(FP), DX
	KMOVB k+24(FP), K1
	VMOVUPD (DX), Z1
	VEXPANDPD (SI), K1, Z1
	VMOVUPD Z1, (DI)
	VZEROUPPER
	RET

// func gatherqq(dst *[8]uint64, base *uint64, off, old *[8]uint64, k uint8)
TEXT ·gatherqq(SB), NOSPLIT, $0-33
	GATHER(Z30)
	RET

// func gatherqqLow(dst *[8]uint64, base *uint64, off, old *[8]uint64, k uint8)
TEXT ·gatherqqLow(SB), NOSPLIT, $0-33
	GATHER(Z6)
	RET

// func cvtqq(dst *[8]int64, back, x *[8]float64)
TEXT ·cvtqq(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ back+8(FP), SI
	MOVQ x+16(FP), DX
	VMOVUPD (DX), Z2
	VCVTTPD2QQ Z2, Z4
	VCVTQQ2PD Z4, Z5
	VMOVDQU64 Z4, (DI)
	VMOVUPD Z5, (SI)
	VZEROUPPER
	RET
