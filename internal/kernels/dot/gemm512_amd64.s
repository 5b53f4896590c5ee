//go:build !purego

#include "textflag.h"
#include "reduce_amd64.h"

// The packed (GEMM-style) AVX-512 mat-mul: see gemm_amd64.go for the panel
// and state layouts and the argument that it keeps R16 bit for bit.

// STOREBLOCKS is the body of gemmStoreNat and gemmStoreBF16 with the
// reduction RED (see STORE4; it stands before any TEXT so that vet's frame
// check does not read its argument names as another function's).
#define STOREBLOCKS(RED) \
	MOVQ dst+0(FP), DI; \
	MOVQ dstride+8(FP), R11; \
	MOVQ st+16(FP), SI; \
	MOVQ blocks+24(FP), DX; \
	MOVQ tcount+32(FP), CX; \
	MOVQ hi+40(FP), BX; \
spos: \
	STORE4(RED); \
	ADDQ $256, SI; \
	ADDQ R11, DI; \
	DECQ CX; \
	JNZ  spos; \
	VZEROUPPER; \
	RET

// GFMA4 fuses the activation vector X into the four rows' accumulators of
// one position (panel vectors in Z24–Z27).
#define GFMA4(X, A0, A1, A2, A3) \
	VFMADD231PD X, Z24, A0; \
	VFMADD231PD X, Z25, A1; \
	VFMADD231PD X, Z26, A2; \
	VFMADD231PD X, Z27, A3

// GSTEPO is one step at panel offset o and activation offset xo: four panel
// vectors against six activation vectors, 24 FMAs; the pointers stay (the
// four-step loop advances them once).
#define GSTEPO(o, xo) \
	VMOVUPD (o+0)(SI), Z24; \
	VMOVUPD (o+64)(SI), Z25; \
	VMOVUPD (o+128)(SI), Z26; \
	VMOVUPD (o+192)(SI), Z27; \
	VMOVUPD xo(DX), Z28; \
	GFMA4(Z28, Z0, Z1, Z2, Z3); \
	VMOVUPD xo(DX)(BX*1), Z29; \
	GFMA4(Z29, Z4, Z5, Z6, Z7); \
	VMOVUPD xo(DX)(BX*2), Z30; \
	GFMA4(Z30, Z8, Z9, Z10, Z11); \
	VMOVUPD xo(R8), Z31; \
	GFMA4(Z31, Z12, Z13, Z14, Z15); \
	VMOVUPD xo(R8)(BX*1), Z28; \
	GFMA4(Z28, Z16, Z17, Z18, Z19); \
	VMOVUPD xo(R8)(BX*2), Z29; \
	GFMA4(Z29, Z20, Z21, Z22, Z23)

// GSTEP is one step that advances the pointers past it.
#define GSTEP \
	GSTEPO(0, 0); \
	ADDQ $256, SI; \
	ADDQ $64, DX; \
	ADDQ $64, R8

// func gemm4x6(w *float64, wstride int, x *float64, xstride int, steps int, st *float64, blocks int, first bool, pf *float64, pflines int)
//
// For each of blocks row blocks (w advancing by wstride bytes, st by 1536):
// the 24 accumulators Z0–Z23 (position t, row r in Z(4t+r)) are zeroed when
// first is set and loaded from st otherwise, then steps times the four
// panel vectors at w (rows 0–3) are fused-multiplied into them against the
// vector at x + t·xstride for the six positions t, w advancing by 256 bytes
// and x by 64, and they are stored back to st. Before each block it
// prefetches pflines cache lines of each of the six rows at pf + t·xstride,
// pf advancing by as many lines.
//
// The steps run four to a loop iteration: with one step per iteration the
// loop's exit, once per block of 32 steps, cost 10% of the kernel's time in
// a prefill.
TEXT ·gemm4x6(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), DI
	MOVQ wstride+8(FP), R11
	MOVQ x+16(FP), R12
	MOVQ xstride+24(FP), BX
	MOVQ steps+32(FP), R13
	MOVQ st+40(FP), AX
	MOVQ blocks+48(FP), R9
	MOVQ pf+64(FP), R10

gblock:
	MOVQ pflines+72(FP), R15
gpf:
	PREFETCHT0 (R10)
	PREFETCHT0 (R10)(BX*1)
	PREFETCHT0 (R10)(BX*2)
	LEAQ (R10)(BX*2), R14
	ADDQ BX, R14
	PREFETCHT0 (R14)
	PREFETCHT0 (R14)(BX*1)
	PREFETCHT0 (R14)(BX*2)
	ADDQ $64, R10
	DECQ R15
	JNZ  gpf
	MOVQ DI, SI
	MOVQ R12, DX
	LEAQ (DX)(BX*2), R8
	ADDQ BX, R8
	CMPB first+56(FP), $0
	JNE  gzero
	LOAD_ACC16(AX)
	VMOVUPD 1024(AX), Z16
	VMOVUPD 1088(AX), Z17
	VMOVUPD 1152(AX), Z18
	VMOVUPD 1216(AX), Z19
	VMOVUPD 1280(AX), Z20
	VMOVUPD 1344(AX), Z21
	VMOVUPD 1408(AX), Z22
	VMOVUPD 1472(AX), Z23
	JMP  grun

gzero:
	CLEAR8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	CLEAR8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	CLEAR8(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)

grun:
	MOVQ R13, CX
	SHRQ $2, CX
	JZ   gone

gstep4:
	GSTEPO(0, 0)
	GSTEPO(256, 64)
	GSTEPO(512, 128)
	GSTEPO(768, 192)
	ADDQ $1024, SI
	ADDQ $256, DX
	ADDQ $256, R8
	DECQ CX
	JNZ  gstep4

gone:
	MOVQ R13, CX
	ANDQ $3, CX
	JZ   gdone

gstep:
	GSTEP
	DECQ CX
	JNZ  gstep

gdone:

	STORE_ACC16(AX)
	VMOVUPD Z16, 1024(AX)
	VMOVUPD Z17, 1088(AX)
	VMOVUPD Z18, 1152(AX)
	VMOVUPD Z19, 1216(AX)
	VMOVUPD Z20, 1280(AX)
	VMOVUPD Z21, 1344(AX)
	VMOVUPD Z22, 1408(AX)
	VMOVUPD Z23, 1472(AX)
	ADDQ $1536, AX
	ADDQ R11, DI
	DECQ R9
	JNZ  gblock
	VZEROUPPER
	RET



// The BF16 store eight rows at a time: the sixteen halves of rows
// 8p..8p+7 (blocks 2p and 2p+1) are reduced together, the R16 tree's levels
// done across rows with 128-bit block shuffles (pairs of lanes two apart,
// then four apart, within each row), then c0+c1 and c2+c3 added lane for
// lane and their two lanes per row brought together by the unpacks; rows
// are paired (0,2), (4,6), (1,3), (5,7) so the eight sums come out in row
// order. Every addition is the one reduce16 makes, with the same first
// operand. Half the shuffle µops per row of RED1BF16.
#define RED2X(A, B, T0, T1) \
	VSHUFF64X2 $0x88, B, A, T0; \
	VSHUFF64X2 $0xdd, B, A, T1; \
	VADDPD     T1, T0, T0

// LOADROWS4 loads the four rows of the block at off(R8): half 0 into
// E0..E3, half 1 (BX bytes further) into O0..O3.
#define LOADROWS4(off, E0, E1, E2, E3, O0, O1, O2, O3) \
	VMOVUPD (off+0)(R8), E0; \
	VMOVUPD (off+0)(R8)(BX*1), O0; \
	VMOVUPD (off+64)(R8), E1; \
	VMOVUPD (off+64)(R8)(BX*1), O1; \
	VMOVUPD (off+128)(R8), E2; \
	VMOVUPD (off+128)(R8)(BX*1), O2; \
	VMOVUPD (off+192)(R8), E3; \
	VMOVUPD (off+192)(R8)(BX*1), O3

// func gemmStore8BF16(dst *float32, dstride int, st *float64, pairs, tcount, hi int)
TEXT ·gemmStore8BF16(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R11
	MOVQ st+16(FP), SI
	MOVQ tcount+32(FP), CX
	MOVQ hi+40(FP), BX

s8pos:
	MOVQ SI, R8
	MOVQ DI, R9
	MOVQ pairs+24(FP), R10

s8pair:
	LOADROWS4(0, Z0, Z1, Z2, Z3, Z8, Z9, Z10, Z11)
	LOADROWS4(1536, Z4, Z5, Z6, Z7, Z12, Z13, Z14, Z15)
	RED2X(Z0, Z2, Z16, Z17)
	RED2X(Z4, Z6, Z18, Z19)
	RED2X(Z1, Z3, Z20, Z21)
	RED2X(Z5, Z7, Z22, Z23)
	RED2X(Z16, Z18, Z24, Z25)
	RED2X(Z20, Z22, Z26, Z27)
	RED2X(Z8, Z10, Z16, Z17)
	RED2X(Z12, Z14, Z18, Z19)
	RED2X(Z9, Z11, Z20, Z21)
	RED2X(Z13, Z15, Z22, Z23)
	RED2X(Z16, Z18, Z28, Z29)
	RED2X(Z20, Z22, Z30, Z31)
	VADDPD    Z28, Z24, Z24
	VADDPD    Z30, Z26, Z26
	VUNPCKLPD Z26, Z24, Z27
	VUNPCKHPD Z26, Z24, Z29
	VADDPD    Z29, Z27, Z27
	VCVTPD2PS Z27, Y27
	VMOVUPS   Y27, (R9)
	ADDQ $3072, R8
	ADDQ $32, R9
	DECQ R10
	JNZ  s8pair
	ADDQ $256, SI
	ADDQ R11, DI
	DECQ CX
	JNZ  s8pos
	VZEROUPPER
	RET

// The panel writers widen m (a multiple of 16) elements of one weight row
// into the R16 halves of its panel slot: per block of sixteen, half 0 at dst
// and half 1 hi bytes further, dst advancing by 256 bytes (four rows'
// vectors interleave there). The halves are those of the format's
// activation layout.

// func bf16Panel512(dst *float64, w *byte, m, hi int)
TEXT ·bf16Panel512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ m+16(FP), CX
	MOVQ hi+24(FP), BX
	MOVL $0xffff0000, AX
	VPBROADCASTD AX, Y15

bpanel:
	VMOVDQU 0(SI), Y9
	VPSLLD  $16, Y9, Y8
	VPAND   Y15, Y9, Y9
	VCVTPS2PD Y8, Z8
	VCVTPS2PD Y9, Z9
	VMOVUPD Z8, 0(DI)
	VMOVUPD Z9, (DI)(BX*1)
	ADDQ $32, SI
	ADDQ $256, DI
	SUBQ $16, CX
	JNZ  bpanel
	VZEROUPPER
	RET

// func f32Panel512(dst *float64, w *byte, m, hi int)
TEXT ·f32Panel512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ m+16(FP), CX
	MOVQ hi+24(FP), BX

fpanel:
	VCVTPS2PD 0(SI), Z8
	VCVTPS2PD 32(SI), Z9
	VMOVUPD Z8, 0(DI)
	VMOVUPD Z9, (DI)(BX*1)
	ADDQ $64, SI
	ADDQ $256, DI
	SUBQ $16, CX
	JNZ  fpanel
	VZEROUPPER
	RET

// func f16Panel512(dst *float64, w *byte, m, hi int)
TEXT ·f16Panel512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ m+16(FP), CX
	MOVQ hi+24(FP), BX

hpanel:
	VCVTPH2PS 0(SI), Y8
	VCVTPS2PD Y8, Z8
	VCVTPH2PS 16(SI), Y9
	VCVTPS2PD Y9, Z9
	VMOVUPD Z8, 0(DI)
	VMOVUPD Z9, (DI)(BX*1)
	ADDQ $32, SI
	ADDQ $256, DI
	SUBQ $16, CX
	JNZ  hpanel
	VZEROUPPER
	RET

// The reductions of gemm4x6's state: count outputs, half 0 of output o at
// st+64·o and half 1 hi bytes further, each reduced with the R16 tree of its
// layout into out[o].

// func gemmReduceNat(out *float64, st *float64, count, hi int)
TEXT ·gemmReduceNat(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ st+8(FP), SI
	MOVQ count+16(FP), CX
	MOVQ hi+24(FP), BX

rnat:
	VMOVUPD (SI), Z0
	VMOVUPD (SI)(BX*1), Z1
	REDUCE512_NAT(Z0, Y0, X0, Z1, Y1, Y2, Y3, X4)
	VMOVSD X0, (DI)
	ADDQ $64, SI
	ADDQ $8, DI
	DECQ CX
	JNZ  rnat
	VZEROUPPER
	RET

// func gemmReduceBF16(out *float64, st *float64, count, hi int)
TEXT ·gemmReduceBF16(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ st+8(FP), SI
	MOVQ count+16(FP), CX
	MOVQ hi+24(FP), BX

rbf16:
	VMOVUPD (SI), Z0
	VMOVUPD (SI)(BX*1), Z1
	REDUCE512_BF16(Z0, Y0, X0, Z1, Y1, X1, Y2, X2, Y3, X3, X4)
	VMOVSD X0, (DI)
	ADDQ $64, SI
	ADDQ $8, DI
	DECQ CX
	JNZ  rbf16
	VZEROUPPER
	RET

// The stores of full row blocks when there is no tail: for positions
// t < tcount and blocks b < blocks, the heads of rows 4b..4b+3 (outputs
// 24b+4t+r of st, halves hi bytes apart) are reduced, rounded to float32
// and stored together at dst + t·dstride + 16b.
#define STORE4(RED) \
	MOVQ SI, R8; \
	MOVQ DI, R9; \
	MOVQ DX, R10; \
store4: \
	VMOVUPD 0(R8), Z0; \
	VMOVUPD 0(R8)(BX*1), Z1; \
	VMOVUPD 64(R8), Z2; \
	VMOVUPD 64(R8)(BX*1), Z3; \
	VMOVUPD 128(R8), Z4; \
	VMOVUPD 128(R8)(BX*1), Z5; \
	VMOVUPD 192(R8), Z6; \
	VMOVUPD 192(R8)(BX*1), Z7; \
	RED; \
	VUNPCKLPD X2, X0, X0; \
	VUNPCKLPD X6, X4, X4; \
	VINSERTF128 $1, X4, Y0, Y0; \
	VCVTPD2PSY Y0, X0; \
	VMOVUPS X0, (R9); \
	ADDQ $1536, R8; \
	ADDQ $16, R9; \
	DECQ R10; \
	JNZ  store4

#define RED4NAT \
	REDUCE512_NAT(Z0, Y0, X0, Z1, Y1, Y8, Y9, X10); \
	REDUCE512_NAT(Z2, Y2, X2, Z3, Y3, Y8, Y9, X10); \
	REDUCE512_NAT(Z4, Y4, X4, Z5, Y5, Y8, Y9, X10); \
	REDUCE512_NAT(Z6, Y6, X6, Z7, Y7, Y8, Y9, X10)

// RED4BF16 is REDUCE512_BF16 for the four pairs, done in place with whole-
// register shuffles (ZE = a0,a2,..,a14, ZO = a1,..,a15): adding the vector
// with its 128-bit blocks swapped, then with its halves swapped, leaves
// (a0+a4)+(a8+a12) = c0 and (a2+a6)+(a10+a14) = c2 in lanes 0 and 1 of ZE
// (c1, c3 in ZO); ZE+ZO is then (c0+c1, c2+c3), whose two lanes are added.
// Fewer shuffle-port µops than the extracts of REDUCE512_BF16.
#define RED1BF16(ZE, ZO, XE) \
	VSHUFF64X2 $0xb1, ZE, ZE, Z8; \
	VADDPD     Z8, ZE, ZE; \
	VSHUFF64X2 $0xb1, ZO, ZO, Z9; \
	VADDPD     Z9, ZO, ZO; \
	VSHUFF64X2 $0x4e, ZE, ZE, Z8; \
	VADDPD     Z8, ZE, ZE; \
	VSHUFF64X2 $0x4e, ZO, ZO, Z9; \
	VADDPD     Z9, ZO, ZO; \
	VADDPD     ZO, ZE, ZE; \
	VPERMILPD  $1, XE, X8; \
	VADDPD     X8, XE, XE

#define RED4BF16 \
	RED1BF16(Z0, Z1, X0); \
	RED1BF16(Z2, Z3, X2); \
	RED1BF16(Z4, Z5, X4); \
	RED1BF16(Z6, Z7, X6)

// func gemmStoreNat(dst *float32, dstride int, st *float64, blocks, tcount, hi int)
TEXT ·gemmStoreNat(SB), NOSPLIT, $0-48
	STOREBLOCKS(RED4NAT)

// func gemmStoreBF16(dst *float32, dstride int, st *float64, blocks, tcount, hi int)
TEXT ·gemmStoreBF16(SB), NOSPLIT, $0-48
	STOREBLOCKS(RED4BF16)

// Indexes gathering the even then the odd elements of sixteen dwords.
DATA evenodd<>+0(SB)/8, $0x0000000200000000
DATA evenodd<>+8(SB)/8, $0x0000000600000004
DATA evenodd<>+16(SB)/8, $0x0000000a00000008
DATA evenodd<>+24(SB)/8, $0x0000000e0000000c
DATA evenodd<>+32(SB)/8, $0x0000000300000001
DATA evenodd<>+40(SB)/8, $0x0000000700000005
DATA evenodd<>+48(SB)/8, $0x0000000b00000009
DATA evenodd<>+56(SB)/8, $0x0000000f0000000d
GLOBL evenodd<>(SB), RODATA|NOPTR, $64

// The activation writers widen m (a multiple of 16) float32s into
// gemm4x6's halves: per block of sixteen, half 0 at dst and half 1 hi bytes
// further, dst advancing by 64 bytes.

// func widenHalvesNat(dst *float64, x *float32, m, hi int)
TEXT ·widenHalvesNat(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ m+16(FP), CX
	MOVQ hi+24(FP), BX

wnat:
	VCVTPS2PD 0(SI), Z0
	VCVTPS2PD 32(SI), Z1
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, (DI)(BX*1)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  wnat
	VZEROUPPER
	RET

// func widenHalvesBF16(dst *float64, x *float32, m, hi int)
TEXT ·widenHalvesBF16(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ m+16(FP), CX
	MOVQ hi+24(FP), BX
	VMOVDQU32 evenodd<>(SB), Z3

wbf16:
	VPERMPS 0(SI), Z3, Z0
	VCVTPS2PD Y0, Z1
	VEXTRACTF64X4 $1, Z0, Y2
	VCVTPS2PD Y2, Z2
	VMOVUPD Z1, (DI)
	VMOVUPD Z2, (DI)(BX*1)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  wbf16
	VZEROUPPER
	RET


// func bf16Panel512x4(dst *float64, w *byte, rb int, m, hi int)
//
// bf16Panel512 for the four rows at w, w+rb, w+2rb, w+3rb at once: per block
// of sixteen columns their four half-0 vectors are the 256 contiguous bytes
// at dst (rows in order), their half-1 vectors hi bytes further.
TEXT ·bf16Panel512x4(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), DX
	MOVQ m+24(FP), CX
	MOVQ hi+32(FP), BX
	LEAQ (SI)(DX*2), R8
	MOVL $0xffff0000, AX
	VPBROADCASTD AX, Y15

bpanel4:
	VMOVDQU 0(SI), Y9
	VPSLLD  $16, Y9, Y8
	VPAND   Y15, Y9, Y9
	VCVTPS2PD Y8, Z8
	VCVTPS2PD Y9, Z9
	VMOVUPD Z8, 0(DI)
	VMOVUPD Z9, (DI)(BX*1)
	VMOVDQU 0(SI)(DX*1), Y11
	VPSLLD  $16, Y11, Y10
	VPAND   Y15, Y11, Y11
	VCVTPS2PD Y10, Z10
	VCVTPS2PD Y11, Z11
	VMOVUPD Z10, 64(DI)
	VMOVUPD Z11, 64(DI)(BX*1)
	VMOVDQU 0(R8), Y13
	VPSLLD  $16, Y13, Y12
	VPAND   Y15, Y13, Y13
	VCVTPS2PD Y12, Z12
	VCVTPS2PD Y13, Z13
	VMOVUPD Z12, 128(DI)
	VMOVUPD Z13, 128(DI)(BX*1)
	VMOVDQU 0(R8)(DX*1), Y7
	VPSLLD  $16, Y7, Y6
	VPAND   Y15, Y7, Y7
	VCVTPS2PD Y6, Z6
	VCVTPS2PD Y7, Z7
	VMOVUPD Z6, 192(DI)
	VMOVUPD Z7, 192(DI)(BX*1)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $256, DI
	SUBQ $16, CX
	JNZ  bpanel4
	VZEROUPPER
	RET

// func fmaPeak(n int)
//
// n iterations of sixteen independent zmm fused multiply-adds on registers:
// the core's float64 FMA ceiling, for BenchmarkFMAPeak.
TEXT ·fmaPeak(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	CLEAR8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	CLEAR8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	VPXORQ Z30, Z30, Z30
	VPXORQ Z31, Z31, Z31

fpeak:
	VFMADD231PD Z30, Z31, Z0
	VFMADD231PD Z30, Z31, Z1
	VFMADD231PD Z30, Z31, Z2
	VFMADD231PD Z30, Z31, Z3
	VFMADD231PD Z30, Z31, Z4
	VFMADD231PD Z30, Z31, Z5
	VFMADD231PD Z30, Z31, Z6
	VFMADD231PD Z30, Z31, Z7
	VFMADD231PD Z30, Z31, Z8
	VFMADD231PD Z30, Z31, Z9
	VFMADD231PD Z30, Z31, Z10
	VFMADD231PD Z30, Z31, Z11
	VFMADD231PD Z30, Z31, Z12
	VFMADD231PD Z30, Z31, Z13
	VFMADD231PD Z30, Z31, Z14
	VFMADD231PD Z30, Z31, Z15
	DECQ CX
	JNZ  fpeak
	VZEROUPPER
	RET
