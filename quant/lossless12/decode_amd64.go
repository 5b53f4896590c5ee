//go:build amd64 && !purego

package lossless12

import "golang.org/x/sys/cpu"

// haveAVX2 gates the assembly decoder (x/sys/cpu also checks that the OS
// saves the YMM registers); GODEBUG=cpu.avx2=off turns it off.
var haveAVX2 = cpu.X86.HasAVX2

// decodeBlocksAVX2 decodes up to n whole blocks (64 weights each) into
// little-endian bf16 at dst, reading the sign-and-mantissa bytes at sm, the
// index bytes at nib and the window bases at bases, and returns how many it
// decoded: it stops before the first block holding an escape, which the
// caller decodes in Go.
//
//go:noescape
func decodeBlocksAVX2(dst, sm, nib, bases *byte, n int) int

func decodeBlocks(dst, sm, nib, bases []byte, n int) int {
	if !haveAVX2 || n == 0 {
		return 0
	}
	_ = dst[2*BlockSize*n-1]
	_ = sm[BlockSize*n-1]
	_ = nib[BlockSize/2*n-1]
	_ = bases[n-1]
	return decodeBlocksAVX2(&dst[0], &sm[0], &nib[0], &bases[0], n)
}

// haveFused gates the fused kernel, which also needs FMA.
var haveFused = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dotBlocksAVX2 adds to the R16 lanes in acc the products of up to n whole
// blocks of a row with x (float64), decoding in registers, and returns how
// many blocks it took: it stops before the first block with an escape.
//
//go:noescape
func dotBlocksAVX2(sm, nib, bases *byte, x *float64, n int, acc *[16]float64) int

func dotBlocks(sm, nib, bases []byte, x []float64, n int, acc *[16]float64) int {
	if !haveFused || n == 0 {
		return 0
	}
	_ = sm[BlockSize*n-1]
	_ = nib[BlockSize/2*n-1]
	_ = bases[n-1]
	_ = x[BlockSize*n-1]
	return dotBlocksAVX2(&sm[0], &nib[0], &bases[0], &x[0], n, acc)
}
