// R16 lane-tree reductions shared by the AVX2 and AVX-512 kernels
// (kernels_amd64.s, kernels512_amd64.s, gemm512_amd64.s). Each leaves the
// reduced head in the low lane of its first X register.

// CLEAR8 clears eight vector registers (the accumulators' +0).
#define CLEAR8(A, B, C, D, E, F, G, H) \
	VPXORQ A, A, A; \
	VPXORQ B, B, B; \
	VPXORQ C, C, C; \
	VPXORQ D, D, D; \
	VPXORQ E, E, E; \
	VPXORQ F, F, F; \
	VPXORQ G, G, G; \
	VPXORQ H, H, H

// Natural layout: lane-wise (A+B)+(C+D) gives c0..c3 in A; then
// hadd gives (c0+c1, c2+c3) and a second hadd the total in the low lane.
#define REDUCE_NAT(YA, XA, YB, YC, YD, XT) \
	VADDPD YB, YA, YA; \
	VADDPD YD, YC, YC; \
	VADDPD YC, YA, YA; \
	VEXTRACTF128 $1, YA, XT; \
	VHADDPD XT, XA, XA; \
	VHADDPD XA, XA, XA

// BF16 layout: low+high halves of A give (a0+a4, a2+a6), of C (a8+a12,
// a10+a14); their sum is (c0, c2). B and D likewise give (c1, c3). Adding
// the two vectors gives (c0+c1, c2+c3); a final hadd the total.
#define REDUCE_BF16(YA, XA, YB, XB, YC, XC, YD, XD, XT) \
	VEXTRACTF128 $1, YA, XT; \
	VADDPD XT, XA, XA; \
	VEXTRACTF128 $1, YC, XT; \
	VADDPD XT, XC, XC; \
	VADDPD XC, XA, XA; \
	VEXTRACTF128 $1, YB, XT; \
	VADDPD XT, XB, XB; \
	VEXTRACTF128 $1, YD, XT; \
	VADDPD XT, XD, XD; \
	VADDPD XD, XB, XB; \
	VADDPD XB, XA, XA; \
	VHADDPD XA, XA, XA

// Natural layout: ZL = a0..a7, ZH = a8..a15. The ymm halves are
// A = a0..3 (low ZL), B = a4..7, C = a8..11 (low ZH), D = a12..15.
#define REDUCE512_NAT(ZL, YL, XL, ZH, YH, YB, YD, XT) \
	VEXTRACTF64X4 $1, ZL, YB; \
	VEXTRACTF64X4 $1, ZH, YD; \
	REDUCE_NAT(YL, XL, YB, YH, YD, XT)

// BF16 layout: ZE = a0,a2,..,a14, ZO = a1,..,a15. The ymm halves are
// A = a0,a2,a4,a6 (low ZE), C = a8,..,a14 (high ZE), B = a1,..,a7 (low ZO),
// D = a9,..,a15 (high ZO): the AVX2 bf16 layout.
#define REDUCE512_BF16(ZE, YE, XE, ZO, YO, XO, YC, XC, YD, XD, XT) \
	VEXTRACTF64X4 $1, ZE, YC; \
	VEXTRACTF64X4 $1, ZO, YD; \
	REDUCE_BF16(YE, XE, YO, XO, YC, XC, YD, XD, XT)

// LOAD_ACC16 and STORE_ACC16 move sixteen zmm accumulators Z0–Z15 from and to
// 1 KiB at R: partial lane sums kept in memory between column blocks or
// chunks (a store and reload of a float64 is exact, so no bit changes).
#define LOAD_ACC16(R) \
	VMOVUPD 0(R), Z0; \
	VMOVUPD 64(R), Z1; \
	VMOVUPD 128(R), Z2; \
	VMOVUPD 192(R), Z3; \
	VMOVUPD 256(R), Z4; \
	VMOVUPD 320(R), Z5; \
	VMOVUPD 384(R), Z6; \
	VMOVUPD 448(R), Z7; \
	VMOVUPD 512(R), Z8; \
	VMOVUPD 576(R), Z9; \
	VMOVUPD 640(R), Z10; \
	VMOVUPD 704(R), Z11; \
	VMOVUPD 768(R), Z12; \
	VMOVUPD 832(R), Z13; \
	VMOVUPD 896(R), Z14; \
	VMOVUPD 960(R), Z15

#define STORE_ACC16(R) \
	VMOVUPD Z0, 0(R); \
	VMOVUPD Z1, 64(R); \
	VMOVUPD Z2, 128(R); \
	VMOVUPD Z3, 192(R); \
	VMOVUPD Z4, 256(R); \
	VMOVUPD Z5, 320(R); \
	VMOVUPD Z6, 384(R); \
	VMOVUPD Z7, 448(R); \
	VMOVUPD Z8, 512(R); \
	VMOVUPD Z9, 576(R); \
	VMOVUPD Z10, 640(R); \
	VMOVUPD Z11, 704(R); \
	VMOVUPD Z12, 768(R); \
	VMOVUPD Z13, 832(R); \
	VMOVUPD Z14, 896(R); \
	VMOVUPD Z15, 960(R)
