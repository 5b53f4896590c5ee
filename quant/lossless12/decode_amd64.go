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

// escRead is how many bytes past the escape cursor the assembly loads (the
// AVX-512 decoder's 64; the AVX2 one reads 32).
const escRead = 64

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

// haveWide gates the AVX-512 decoder: BW for byte operations and masks,
// VBMI for VPERMB; GODEBUG=cpu.avx512f=off (or any of the others off)
// falls back to the AVX2 one.
var haveWide = haveAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI

// decodeBlocks512 is decodeBlocksAVX2 with AVX-512 (decode512_amd64.s).
//
//go:noescape
func decodeBlocks512(dst, sm, idx, bases, esc *byte, n int) int

// decodeWhole decodes the first n whole blocks of a row with the assembly
// and returns the escape bytes they used, or false without it (the caller
// then runs the Go decoder). The row has been checked, so its escape area
// holds every escape of those blocks.
//
// The assembly loads the escape area escRead bytes at a time from its
// cursor, so it needs that many readable bytes past the area's end: the
// next row's, except for the last row of a matrix or a slice, whose area
// is copied into a padded buffer first.
func decodeWhole(dst, sm, idx, bases, esc []byte, n int, wide bool) (int, bool) {
	if !haveAVX2 || n == 0 {
		return 0, false
	}
	_ = dst[2*BlockSize*n-1]
	_ = sm[BlockSize*n-1]
	_ = idx[IndexBits*BlockSize/8*n-1]
	_ = bases[n-1]
	e, pad := escapeArea(esc)
	var ne int
	if wide && haveWide {
		ne = decodeBlocks512(&dst[0], &sm[0], &idx[0], &bases[0], e, n)
	} else {
		ne = decodeBlocksAVX2(&dst[0], &sm[0], &idx[0], &bases[0], e, n)
	}
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

// checkBlocksAVX2 returns how many of the n whole blocks from idx and bases
// pass the block rule, the escapes they use coming from esc (escLen bytes),
// and the escape bytes they use (decode_amd64.s).
//
//go:noescape
func checkBlocksAVX2(idx, bases, esc *byte, n, escLen int) (blocks, ne int)

// checkWhole runs the assembly check over the first n whole blocks of a row
// and returns how many passed and the escape bytes they used; 0, 0
// without the assembly.
func checkWhole(idx, bases, esc []byte, n int) (int, int) {
	if !haveAVX2 || n == 0 {
		return 0, 0
	}
	_ = idx[IndexBits*BlockSize/8*n-1]
	_ = bases[n-1]
	e, pad := escapeArea(esc)
	k, ne := checkBlocksAVX2(&idx[0], &bases[0], e, n, len(esc))
	if pad != nil {
		escPads.Put(pad)
	}
	return k, ne
}
