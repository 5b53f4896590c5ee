//go:build amd64 && !purego

package lossless12

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// haveAVX2 gates the assembly decoder, which uses AVX2 and POPCNT (x/sys/cpu
// also checks that the OS saves the YMM registers); GODEBUG=cpu.avx2=off
// turns it off.
var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT

// escRead is how many bytes past the escape cursor the assembly loads.
const escRead = 32

// escPads holds copies of escape areas that end too close to the end of
// their memory for the assembly's loads.
var escPads = sync.Pool{New: func() any { return new([]byte) }}

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
//
// The assembly loads the escape area escRead bytes at a time from its
// cursor, so it needs that many readable bytes past the area's end: the
// next row's, except for the last row of a matrix or a slice, whose area
// is copied into a padded buffer first.
func decodeWhole(dst, sm, idx, bases, esc []byte, n int) (int, bool) {
	if !haveAVX2 || n == 0 {
		return 0, false
	}
	_ = dst[2*BlockSize*n-1]
	_ = sm[BlockSize*n-1]
	_ = idx[IndexBits*BlockSize/8*n-1]
	_ = bases[n-1]
	e, pad := escapeArea(esc)
	ne := decodeBlocksAVX2(&dst[0], &sm[0], &idx[0], &bases[0], e, n)
	if pad != nil {
		escPads.Put(pad)
	}
	return ne, true
}

// escapeArea returns where the assembly is to read the escape area esc:
// esc itself when escRead bytes past its end are readable, else a padded
// copy, returned too so that the caller puts it back in escPads.
func escapeArea(esc []byte) (*byte, *[]byte) {
	if cap(esc)-len(esc) >= escRead {
		return &esc[:1][0], nil
	}
	p := escPads.Get().(*[]byte)
	if cap(*p) < len(esc)+escRead {
		*p = make([]byte, len(esc)+escRead)
	}
	pad := (*p)[:len(esc)+escRead]
	copy(pad, esc)
	return &pad[0], p
}

// haveFused gates the fused kernel, which also needs FMA.
var haveFused = haveAVX2 && cpu.X86.HasFMA

// dotBlocksAVX2 adds to the R16 lanes in acc the products of n whole
// blocks of a row with x (float64, in asmOrder), decoding in registers,
// and returns the escape bytes it used.
//
//go:noescape
func dotBlocksAVX2(sm, idx, bases, esc *byte, x *float64, n int, acc *[16]float64) int

// dotWhole runs the fused kernel over the first n whole blocks of a row,
// reading the escape area as decodeWhole does, and returns the escape bytes
// they used.
func dotWhole(sm, idx, bases, esc []byte, x []float64, n int, acc *[16]float64) int {
	_ = sm[BlockSize*n-1]
	_ = idx[IndexBits*BlockSize/8*n-1]
	_ = bases[n-1]
	_ = x[BlockSize*n-1]
	e, pad := escapeArea(esc)
	ne := dotBlocksAVX2(&sm[0], &idx[0], &bases[0], e, &x[0], n, acc)
	if pad != nil {
		escPads.Put(pad)
	}
	return ne
}
