//go:build amd64 && !purego

#include "textflag.h"

// The sixteen E2M1 values as float64 bit patterns, split for the two
// permutes that look them up (see rowsAVX512asm). e2m1lo/e2m1hi: codes
// 0..7 and 8..15, the two tables of VPERMI2PD, whose index bit 3 (the sign
// bit of the code) selects the table.
DATA e2m1lo<>+0(SB)/8, $0x0000000000000000
DATA e2m1lo<>+8(SB)/8, $0x3fe0000000000000
DATA e2m1lo<>+16(SB)/8, $0x3ff0000000000000
DATA e2m1lo<>+24(SB)/8, $0x3ff8000000000000
DATA e2m1lo<>+32(SB)/8, $0x4000000000000000
DATA e2m1lo<>+40(SB)/8, $0x4008000000000000
DATA e2m1lo<>+48(SB)/8, $0x4010000000000000
DATA e2m1lo<>+56(SB)/8, $0x4018000000000000
GLOBL e2m1lo<>(SB), RODATA|NOPTR, $64
DATA e2m1hi<>+0(SB)/8, $0x8000000000000000
DATA e2m1hi<>+8(SB)/8, $0xbfe0000000000000
DATA e2m1hi<>+16(SB)/8, $0xbff0000000000000
DATA e2m1hi<>+24(SB)/8, $0xbff8000000000000
DATA e2m1hi<>+32(SB)/8, $0xc000000000000000
DATA e2m1hi<>+40(SB)/8, $0xc008000000000000
DATA e2m1hi<>+48(SB)/8, $0xc010000000000000
DATA e2m1hi<>+56(SB)/8, $0xc018000000000000
GLOBL e2m1hi<>(SB), RODATA|NOPTR, $64

// e2m1d: the upper 32 bits of each pattern, for VPERMPS (the lower 32 bits
// of every E2M1 value are zero).
DATA e2m1d<>+0(SB)/8, $0x3fe0000000000000
DATA e2m1d<>+8(SB)/8, $0x3ff800003ff00000
DATA e2m1d<>+16(SB)/8, $0x4008000040000000
DATA e2m1d<>+24(SB)/8, $0x4018000040100000
DATA e2m1d<>+32(SB)/8, $0xbfe0000080000000
DATA e2m1d<>+40(SB)/8, $0xbff80000bff00000
DATA e2m1d<>+48(SB)/8, $0xc0080000c0000000
DATA e2m1d<>+56(SB)/8, $0xc0180000c0100000
GLOBL e2m1d<>(SB), RODATA|NOPTR, $64

// VPERMT2Q indexes gathering the first (qeven) and second (qodd) 8 bytes of
// each of eight consecutive 16-byte groups.
DATA qeven<>+0(SB)/8, $0
DATA qeven<>+8(SB)/8, $2
DATA qeven<>+16(SB)/8, $4
DATA qeven<>+24(SB)/8, $6
DATA qeven<>+32(SB)/8, $8
DATA qeven<>+40(SB)/8, $10
DATA qeven<>+48(SB)/8, $12
DATA qeven<>+56(SB)/8, $14
GLOBL qeven<>(SB), RODATA|NOPTR, $64
DATA qodd<>+0(SB)/8, $1
DATA qodd<>+8(SB)/8, $3
DATA qodd<>+16(SB)/8, $5
DATA qodd<>+24(SB)/8, $7
DATA qodd<>+32(SB)/8, $9
DATA qodd<>+40(SB)/8, $11
DATA qodd<>+48(SB)/8, $13
DATA qodd<>+56(SB)/8, $15
GLOBL qodd<>(SB), RODATA|NOPTR, $64

DATA scale255<>+0(SB)/8, $255
GLOBL scale255<>(SB), RODATA|NOPTR, $8
DATA scalebias<>+0(SB)/8, $896
GLOBL scalebias<>(SB), RODATA|NOPTR, $8

// GROUP8 multiplies eight groups of a row: Z3 (Z4) holds the first
// (second) 8 packed bytes of each, one group per lane; R11 points at the
// activations of the block, DX at the scale bytes; KM masks the groups that
// exist (all eight except in a row's tail).
#define GROUP8(KM) \
	VPSRLQ $28, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 448(R11), Z2, Z23 \
	VFMADD231PD 960(R11), Z7, Z23 \
	VPSRLQ $24, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 384(R11), Z2, Z22 \
	VFMADD231PD 896(R11), Z7, Z22 \
	VPSRLQ $20, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 320(R11), Z2, Z21 \
	VFMADD231PD 832(R11), Z7, Z21 \
	VPSRLQ $16, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 256(R11), Z2, Z20 \
	VFMADD231PD 768(R11), Z7, Z20 \
	VPSRLQ $12, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 192(R11), Z2, Z19 \
	VFMADD231PD 704(R11), Z7, Z19 \
	VPSRLQ $8, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 128(R11), Z2, Z18 \
	VFMADD231PD 640(R11), Z7, Z18 \
	VPSRLQ $4, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 64(R11), Z2, Z17 \
	VFMADD231PD 576(R11), Z7, Z17 \
	VPERMPS.Z Z27, Z3, K6, Z7 \
	VPERMI2PD Z31, Z30, Z3 \
	VMULPD 0(R11), Z3, Z16 \
	VFMADD231PD 512(R11), Z7, Z16 \
	VPSRLQ $28, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1472(R11), Z2, Z23 \
	VFMADD231PD 1984(R11), Z7, Z23 \
	VPSRLQ $24, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1408(R11), Z2, Z22 \
	VFMADD231PD 1920(R11), Z7, Z22 \
	VPSRLQ $20, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1344(R11), Z2, Z21 \
	VFMADD231PD 1856(R11), Z7, Z21 \
	VPSRLQ $16, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1280(R11), Z2, Z20 \
	VFMADD231PD 1792(R11), Z7, Z20 \
	VPSRLQ $12, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1216(R11), Z2, Z19 \
	VFMADD231PD 1728(R11), Z7, Z19 \
	VPSRLQ $8, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1152(R11), Z2, Z18 \
	VFMADD231PD 1664(R11), Z7, Z18 \
	VPSRLQ $4, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1088(R11), Z2, Z17 \
	VFMADD231PD 1600(R11), Z7, Z17 \
	VPERMPS.Z Z27, Z4, K6, Z7 \
	VPERMI2PD Z31, Z30, Z4 \
	VFMADD231PD 1024(R11), Z4, Z16 \
	VFMADD231PD 1536(R11), Z7, Z16 \
	VADDPD Z20, Z16, Z16 \
	VADDPD Z21, Z17, Z17 \
	VADDPD Z22, Z18, Z18 \
	VADDPD Z23, Z19, Z19 \
	VADDPD Z17, Z16, Z16 \
	VADDPD Z19, Z18, Z18 \
	VADDPD Z18, Z16, Z16 \
	VPMOVZXBQ.Z (DX), KM, Z5 \
	VPCMPEQQ.BCST scale255<>(SB), Z5, KM, K2 \
	KMOVW K2, AX \
	POPCNTL AX, AX \
	ADDQ AX, BX \
	KANDNW KM, K2, K1 \
	VPADDQ.BCST scalebias<>(SB), Z5, Z5 \
	VPSLLQ $52, Z5, Z5 \
	VMULPD.Z Z5, Z16, K1, Z16 \
	VMOVUPD Z16, (SP) \
	VADDSD 0(SP), X6, X6 \
	VADDSD 8(SP), X6, X6 \
	VADDSD 16(SP), X6, X6 \
	VADDSD 24(SP), X6, X6 \
	VADDSD 32(SP), X6, X6 \
	VADDSD 40(SP), X6, X6 \
	VADDSD 48(SP), X6, X6 \
	VADDSD 56(SP), X6, X6

// GROUP8X2 is GROUP8 for two activation rows (the second at R11+R13)
// sharing the decoded weights, with accumulators Z8.. and X24.
#define GROUP8X2(KM) \
	VPSRLQ $28, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 448(R11), Z2, Z23 \
	VMULPD 448(R11)(R13*1), Z2, Z15 \
	VFMADD231PD 960(R11), Z7, Z23 \
	VFMADD231PD 960(R11)(R13*1), Z7, Z15 \
	VPSRLQ $24, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 384(R11), Z2, Z22 \
	VMULPD 384(R11)(R13*1), Z2, Z14 \
	VFMADD231PD 896(R11), Z7, Z22 \
	VFMADD231PD 896(R11)(R13*1), Z7, Z14 \
	VPSRLQ $20, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 320(R11), Z2, Z21 \
	VMULPD 320(R11)(R13*1), Z2, Z13 \
	VFMADD231PD 832(R11), Z7, Z21 \
	VFMADD231PD 832(R11)(R13*1), Z7, Z13 \
	VPSRLQ $16, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 256(R11), Z2, Z20 \
	VMULPD 256(R11)(R13*1), Z2, Z12 \
	VFMADD231PD 768(R11), Z7, Z20 \
	VFMADD231PD 768(R11)(R13*1), Z7, Z12 \
	VPSRLQ $12, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 192(R11), Z2, Z19 \
	VMULPD 192(R11)(R13*1), Z2, Z11 \
	VFMADD231PD 704(R11), Z7, Z19 \
	VFMADD231PD 704(R11)(R13*1), Z7, Z11 \
	VPSRLQ $8, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 128(R11), Z2, Z18 \
	VMULPD 128(R11)(R13*1), Z2, Z10 \
	VFMADD231PD 640(R11), Z7, Z18 \
	VFMADD231PD 640(R11)(R13*1), Z7, Z10 \
	VPSRLQ $4, Z3, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VMULPD 64(R11), Z2, Z17 \
	VMULPD 64(R11)(R13*1), Z2, Z9 \
	VFMADD231PD 576(R11), Z7, Z17 \
	VFMADD231PD 576(R11)(R13*1), Z7, Z9 \
	VPERMPS.Z Z27, Z3, K6, Z7 \
	VPERMI2PD Z31, Z30, Z3 \
	VMULPD 0(R11), Z3, Z16 \
	VMULPD 0(R11)(R13*1), Z3, Z8 \
	VFMADD231PD 512(R11), Z7, Z16 \
	VFMADD231PD 512(R11)(R13*1), Z7, Z8 \
	VPSRLQ $28, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1472(R11), Z2, Z23 \
	VFMADD231PD 1472(R11)(R13*1), Z2, Z15 \
	VFMADD231PD 1984(R11), Z7, Z23 \
	VFMADD231PD 1984(R11)(R13*1), Z7, Z15 \
	VPSRLQ $24, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1408(R11), Z2, Z22 \
	VFMADD231PD 1408(R11)(R13*1), Z2, Z14 \
	VFMADD231PD 1920(R11), Z7, Z22 \
	VFMADD231PD 1920(R11)(R13*1), Z7, Z14 \
	VPSRLQ $20, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1344(R11), Z2, Z21 \
	VFMADD231PD 1344(R11)(R13*1), Z2, Z13 \
	VFMADD231PD 1856(R11), Z7, Z21 \
	VFMADD231PD 1856(R11)(R13*1), Z7, Z13 \
	VPSRLQ $16, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1280(R11), Z2, Z20 \
	VFMADD231PD 1280(R11)(R13*1), Z2, Z12 \
	VFMADD231PD 1792(R11), Z7, Z20 \
	VFMADD231PD 1792(R11)(R13*1), Z7, Z12 \
	VPSRLQ $12, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1216(R11), Z2, Z19 \
	VFMADD231PD 1216(R11)(R13*1), Z2, Z11 \
	VFMADD231PD 1728(R11), Z7, Z19 \
	VFMADD231PD 1728(R11)(R13*1), Z7, Z11 \
	VPSRLQ $8, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1152(R11), Z2, Z18 \
	VFMADD231PD 1152(R11)(R13*1), Z2, Z10 \
	VFMADD231PD 1664(R11), Z7, Z18 \
	VFMADD231PD 1664(R11)(R13*1), Z7, Z10 \
	VPSRLQ $4, Z4, Z2 \
	VPERMPS.Z Z27, Z2, K6, Z7 \
	VPERMI2PD Z31, Z30, Z2 \
	VFMADD231PD 1088(R11), Z2, Z17 \
	VFMADD231PD 1088(R11)(R13*1), Z2, Z9 \
	VFMADD231PD 1600(R11), Z7, Z17 \
	VFMADD231PD 1600(R11)(R13*1), Z7, Z9 \
	VPERMPS.Z Z27, Z4, K6, Z7 \
	VPERMI2PD Z31, Z30, Z4 \
	VFMADD231PD 1024(R11), Z4, Z16 \
	VFMADD231PD 1024(R11)(R13*1), Z4, Z8 \
	VFMADD231PD 1536(R11), Z7, Z16 \
	VFMADD231PD 1536(R11)(R13*1), Z7, Z8 \
	VADDPD Z20, Z16, Z16 \
	VADDPD Z21, Z17, Z17 \
	VADDPD Z22, Z18, Z18 \
	VADDPD Z23, Z19, Z19 \
	VADDPD Z17, Z16, Z16 \
	VADDPD Z19, Z18, Z18 \
	VADDPD Z18, Z16, Z16 \
	VADDPD Z12, Z8, Z8 \
	VADDPD Z13, Z9, Z9 \
	VADDPD Z14, Z10, Z10 \
	VADDPD Z15, Z11, Z11 \
	VADDPD Z9, Z8, Z8 \
	VADDPD Z11, Z10, Z10 \
	VADDPD Z10, Z8, Z8 \
	VPMOVZXBQ.Z (DX), KM, Z5 \
	VPCMPEQQ.BCST scale255<>(SB), Z5, KM, K2 \
	KMOVW K2, AX \
	POPCNTL AX, AX \
	ADDQ AX, BX \
	KANDNW KM, K2, K1 \
	VPADDQ.BCST scalebias<>(SB), Z5, Z5 \
	VPSLLQ $52, Z5, Z5 \
	VMULPD.Z Z5, Z16, K1, Z16 \
	VMOVUPD Z16, (SP) \
	VMULPD.Z Z5, Z8, K1, Z8 \
	VMOVUPD Z8, 64(SP) \
	VADDSD 0(SP), X6, X6 \
	VADDSD 64(SP), X24, X24 \
	VADDSD 8(SP), X6, X6 \
	VADDSD 72(SP), X24, X24 \
	VADDSD 16(SP), X6, X6 \
	VADDSD 80(SP), X24, X24 \
	VADDSD 24(SP), X6, X6 \
	VADDSD 88(SP), X24, X24 \
	VADDSD 32(SP), X6, X6 \
	VADDSD 96(SP), X24, X24 \
	VADDSD 40(SP), X6, X6 \
	VADDSD 104(SP), X24, X24 \
	VADDSD 48(SP), X6, X6 \
	VADDSD 112(SP), X24, X24 \
	VADDSD 56(SP), X6, X6 \
	VADDSD 120(SP), X24, X24

// func rowsAVX512asm(dst *float32, rows int, packed, scales *byte, xw *float64, groups int) int
//
// Eight groups of a row at a time, transposed: accumulator Z16+l holds RG
// lane l (elements j ≡ l mod 8) of the eight groups, one group per float64
// lane, so the RG tree is seven vertical adds. The activations were laid
// out to match by widenBlocked: in a block of eight groups, the 64 bytes at
// offset 64·j hold element j of groups 0..7.
//
// Decoding: Z3 (Z4) holds the first (second) 8 packed bytes of each group,
// one group per lane. Shifted right by 4t, its bits 0..3 are the code of
// element t (16+t) and bits 32..35 that of element 8+t (24+t) of every
// group. VPERMI2PD reads the former as an index into the sixteen float64
// E2M1 values; VPERMPS reads the latter (as the index of the upper dword)
// from a table of their upper halves, the lower dword zeroed by mask K6. So
// the weights are exact float64 values, never converted from an integer,
// and one shift serves two of the 32 lookups.
//
// Each lane sums its four products in ascending j (the first multiplies
// instead of adding to +0: they differ only in the sign of a zero lane,
// which cannot change acc, since acc starts at +0 and is never −0). The
// eight sub-sums are multiplied by their scales 2^(s−127) (exact: |sub| ≥
// 2^−150 unless zero, and ≤ 2^136), groups with scale byte 255 and lanes
// past the row's end are zeroed by the mask (adding +0 leaves acc
// unchanged, as skipping does), and acc adds the eight in group order. A
// row's last groups%8 groups use masked loads, which do not fault past the
// end of the buffers.
TEXT ·rowsAVX512asm(SB), NOSPLIT, $96-56
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), CX
	MOVQ packed+16(FP), SI
	MOVQ scales+24(FP), DX
	MOVQ xw+32(FP), R8
	MOVQ groups+40(FP), R9
	XORQ BX, BX
	VMOVUPD   e2m1lo<>(SB), Z30
	VMOVUPD   e2m1hi<>(SB), Z31
	VMOVUPS   e2m1d<>(SB), Z27
	VMOVDQU64 qeven<>(SB), Z28
	VMOVDQU64 qodd<>(SB), Z29

	// K6: the upper dword of every qword.
	MOVL  $0xaaaa, AX
	KMOVW AX, K6

	// Masks of a row's last groups%8 groups, kept in the frame: 64(SP) the
	// groups, 72(SP) and 80(SP) their qwords in the first and second 64 bytes.
	MOVQ R9, R10
	ANDQ $7, R10
	MOVQ R10, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	MOVQ AX, 64(SP)
	LEAQ (R10)(R10*1), CX
	CMPQ CX, $8
	JLE  lowq
	SUBQ $8, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	MOVQ AX, 80(SP)
	MOVQ $0xff, 72(SP)
	JMP  masksdone

lowq:
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	MOVQ AX, 72(SP)
	MOVQ $0, 80(SP)

masksdone:
	MOVQ rows+8(FP), CX

rowloop:
	VXORPD X6, X6, X6
	MOVQ   R8, R11
	MOVQ   R9, R10
	MOVL   $0xff, AX
	KMOVW  AX, K5
	CMPQ   R10, $8
	JLT    tail

block:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	VMOVDQU64  0(SI), Z3
	VMOVDQU64  0(SI), Z4
	VPERMT2Q   64(SI), Z28, Z3
	VPERMT2Q   64(SI), Z29, Z4
	GROUP8(K5)
	ADDQ $128, SI
	ADDQ $8, DX
	ADDQ $2048, R11
	SUBQ $8, R10
	CMPQ R10, $8
	JGE  block

tail:
	TESTQ R10, R10
	JZ    rowdone
	KMOVW       72(SP), K3
	KMOVW       80(SP), K4
	KMOVW       64(SP), K5
	VMOVDQU64.Z 0(SI), K3, Z3
	VMOVDQU64.Z 64(SI), K4, Z1
	VMOVDQA64   Z3, Z4
	VPERMT2Q    Z1, Z28, Z3
	VPERMT2Q    Z1, Z29, Z4
	GROUP8(K5)
	ADDQ R10, DX
	SHLQ $4, R10
	ADDQ R10, SI

rowdone:
	VCVTSD2SS X6, X6, X7
	VMOVSS    X7, (DI)
	ADDQ      $4, DI
	DECQ      CX
	JNZ       rowloop

	VZEROUPPER
	MOVQ BX, ret+48(FP)
	RET

// func rows2AVX512asm(dst0, dst1 *float32, rows int, packed, scales *byte, xw0, xw1 *float64, groups int) int
//
// rowsAVX512asm for two activation rows at once: each weight is decoded
// once and multiplied into two sets of accumulators (the batched MatMul).
// Every output equals what rowsAVX512asm computes for that activation row.
TEXT ·rows2AVX512asm(SB), NOSPLIT, $160-72
	MOVQ dst0+0(FP), DI
	MOVQ dst1+8(FP), R12
	SUBQ DI, R12
	MOVQ rows+16(FP), CX
	MOVQ packed+24(FP), SI
	MOVQ scales+32(FP), DX
	MOVQ xw0+40(FP), R8
	MOVQ xw1+48(FP), R13
	SUBQ R8, R13
	MOVQ groups+56(FP), R9
	XORQ BX, BX
	VMOVUPD   e2m1lo<>(SB), Z30
	VMOVUPD   e2m1hi<>(SB), Z31
	VMOVUPS   e2m1d<>(SB), Z27
	VMOVDQU64 qeven<>(SB), Z28
	VMOVDQU64 qodd<>(SB), Z29

	// K6: the upper dword of every qword.
	MOVL  $0xaaaa, AX
	KMOVW AX, K6

	// Masks of a row's last groups%8 groups, kept in the frame: 128(SP) the
	// groups, 136(SP) and 144(SP) their qwords in the first and second 64 bytes.
	MOVQ R9, R10
	ANDQ $7, R10
	MOVQ R10, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	MOVQ AX, 128(SP)
	LEAQ (R10)(R10*1), CX
	CMPQ CX, $8
	JLE  lowq
	SUBQ $8, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	MOVQ AX, 144(SP)
	MOVQ $0xff, 136(SP)
	JMP  masksdone

lowq:
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	MOVQ AX, 136(SP)
	MOVQ $0, 144(SP)

masksdone:
	MOVQ rows+16(FP), CX

rowloop:
	VXORPD X6, X6, X6
	VXORPD X24, X24, X24
	MOVQ   R8, R11
	MOVQ   R9, R10
	MOVL   $0xff, AX
	KMOVW  AX, K5
	CMPQ   R10, $8
	JLT    tail

block:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	VMOVDQU64  0(SI), Z3
	VMOVDQU64  0(SI), Z4
	VPERMT2Q   64(SI), Z28, Z3
	VPERMT2Q   64(SI), Z29, Z4
	GROUP8X2(K5)
	ADDQ $128, SI
	ADDQ $8, DX
	ADDQ $2048, R11
	SUBQ $8, R10
	CMPQ R10, $8
	JGE  block

tail:
	TESTQ R10, R10
	JZ    rowdone
	KMOVW       136(SP), K3
	KMOVW       144(SP), K4
	KMOVW       128(SP), K5
	VMOVDQU64.Z 0(SI), K3, Z3
	VMOVDQU64.Z 64(SI), K4, Z1
	VMOVDQA64   Z3, Z4
	VPERMT2Q    Z1, Z28, Z3
	VPERMT2Q    Z1, Z29, Z4
	GROUP8X2(K5)
	ADDQ R10, DX
	SHLQ $4, R10
	ADDQ R10, SI

rowdone:
	VCVTSD2SS X6, X6, X7
	VMOVSS    X7, (DI)
	VCVTSD2SS X24, X24, X7
	VMOVSS    X7, (DI)(R12*1)
	ADDQ      $4, DI
	DECQ      CX
	JNZ       rowloop

	VZEROUPPER
	MOVQ BX, ret+64(FP)
	RET
