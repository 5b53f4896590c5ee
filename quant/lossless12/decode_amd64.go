//go:build amd64 && !purego

package lossless12

import "golang.org/x/sys/cpu"

// haveAVX2 gates the assembly decoder (x/sys/cpu also checks that the OS
// saves the YMM registers); GODEBUG=cpu.avx2=off turns it off.
var haveAVX2 = cpu.X86.HasAVX2

// decodeBlocksAVX2 decodes n whole blocks (64 weights each) into
// little-endian bf16 at dst, reading the sign-and-mantissa bytes at sm,
// the index planes at idx, the window bases at bases and the escaped
// exponents from esc on, and returns how many escape bytes it used.
//
//go:noescape
func decodeBlocksAVX2(dst, sm, idx, bases, esc *byte, n int) int

// decodeWhole decodes the first n whole blocks of a row with the assembly
// and returns the escape bytes they used, or false without it (the caller
// then runs the Go decoder). The row has been checked, so its escape area
// holds every escape of those blocks.
func decodeWhole(dst, sm, idx, bases, esc []byte, n int) (int, bool) {
	if !haveAVX2 || n == 0 {
		return 0, false
	}
	_ = dst[2*BlockSize*n-1]
	_ = sm[BlockSize*n-1]
	_ = idx[IndexBits*BlockSize/8*n-1]
	_ = bases[n-1]
	var e *byte
	if len(esc) > 0 {
		e = &esc[0]
	}
	return decodeBlocksAVX2(&dst[0], &sm[0], &idx[0], &bases[0], e, n), true
}
