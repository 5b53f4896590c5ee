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

// plainBlocksAVX2 returns how many of the n blocks from nib and bases plainBlock accepts before
// the first it does not, prefetching ahead bytes beyond each block's indices (a prefetch never
// faults, wherever it points).
//
//go:noescape
func plainBlocksAVX2(nib, bases *byte, n, ahead int) int

// plainBlocks is plainBlocksGo in assembly, or 0 without AVX2 (the caller then runs the twin).
// ahead is where the indices of the next row start, relative to this row's.
func plainBlocks(nib, bases []byte, n, ahead int) int {
	if !haveAVX2 || n == 0 {
		return 0
	}
	_ = nib[BlockSize/2*n-1]
	_ = bases[n-1]
	return plainBlocksAVX2(&nib[0], &bases[0], n, ahead)
}

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

// haveWide gates the AVX-512 fused kernel (dot512_amd64.s): VBMI for the
// byte permutes that build the weights, VBMI2 for the escape expand,
// GFNI for the bit moves;
// GODEBUG=cpu.avx512f=off (or any of the others off) falls back to the
// AVX2 kernel.
var haveWide = haveFused && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512VBMI2 && cpu.X86.HasAVX512GFNI

// The AVX-512 kernels: rows 0 … 3 (or 1, or 0) of a pass starting at row,
// each rb bytes after the last, from the block whose base, sign-and-mantissa
// bytes and index bytes are at the given offsets in a row, up to n blocks;
// esc is the offset of the escape area. They add to the lanes in acc (even
// lanes, then odd, in the scaled domain of dot512_amd64.s), move the escape
// counts in ne, and return how many blocks they took: fewer than n when a
// block's window base is above 240. Having taken all n, with out not nil,
// they store the rows' float32 results at out instead.

//go:noescape
func dotRows4x512(row *byte, base, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int, out *float32) int

//go:noescape
func dotRows2x512(row *byte, base, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int, out *float32) int

//go:noescape
func dotRows1x512(row *byte, base, sm, nib, esc, rb int, x *float64, n int, acc *[4][16]float64, ne *[4]int, out *float32) int

// dotRowsWide runs the AVX-512 kernel over the whole blocks k … k+n−1 of
// nr (1, 2 or 4) rows at the start of rows, x being the activations of all
// the whole blocks in the kernel's order and scale, and returns the blocks
// it took (0 without the kernel). Given out (rows of whole blocks only), a
// call that takes the last block stores the rows' results there instead of
// their lanes.
func dotRowsWide(rows []byte, nr int, h Header, x []float64, k, n int, acc *[4][16]float64, ne *[4]int, out []float32) int {
	if !haveWide || n == 0 {
		return 0
	}
	rb := int(h.RowBytes())
	nb := int(blocks(int64(h.Cols)))
	_ = rows[nr*rb-1]
	if k < 0 || n < 0 || k+n > h.Cols/BlockSize || len(x) < (k+n)*BlockSize {
		panic("lossless12: dotRowsWide beyond the whole blocks")
	}
	base, sm, nib, esc := k, nb+k*BlockSize, nb+h.Cols+k*BlockSize/2, nb+h.Cols+(h.Cols+1)/2
	xk := &x[k*BlockSize]
	var o *float32
	if out != nil {
		o = &out[:nr][0]
	}
	switch nr {
	case 4:
		return dotRows4x512(&rows[0], base, sm, nib, esc, rb, xk, n, acc, ne, o)
	case 2:
		return dotRows2x512(&rows[0], base, sm, nib, esc, rb, xk, n, acc, ne, o)
	case 1:
		return dotRows1x512(&rows[0], base, sm, nib, esc, rb, xk, n, acc, ne, o)
	}
	panic("lossless12: dotRowsWide of 1, 2 or 4 rows")
}

//go:noescape
func dotPasses4x512(row *byte, sm, nib, esc, rb int, x *float64, n, passes int, out *float32) int

// passesWide runs the AVX-512 kernel over passes of four rows at the start
// of rows that have whole blocks only, storing each row's result in out,
// and returns how many passes it finished: fewer than passes when the
// next pass holds a block the kernel hands back (and 0 without the
// kernel), which the caller runs through dotRowsWide.
func passesWide(rows []byte, h Header, x []float64, passes int, out []float32) int {
	n := h.Cols / BlockSize
	if !haveWide || passes <= 0 || n == 0 {
		return 0
	}
	if n*BlockSize != h.Cols || len(x) < h.Cols || len(out) < 4*passes {
		panic("lossless12: passesWide on rows with a short block")
	}
	rb := int(h.RowBytes())
	_ = rows[4*passes*rb-1]
	nb := int(blocks(int64(h.Cols)))
	return passes - dotPasses4x512(&rows[0], nb, nb+h.Cols, nb+h.Cols+h.Cols/2, rb, &x[0], n, passes, &out[0])
}

//go:noescape
func decodeRows512(row *byte, sm, nib, esc, rb int, dst *byte, n, rows int) int

// decodeRowsWide decodes the whole blocks of nr rows (their bytes, at the
// start of rows) into dst, 2·Cols bytes a row, with the AVX-512 decoder and
// returns how many blocks of each row it decoded (all, or 0 without the
// decoder) and the escape bytes the last row's use. Only rows of whole
// blocks are decoded more than one a call (the caller decodes the others'
// short block between them).
func decodeRowsWide(rows []byte, nr int, h Header, dst []byte) (k, ne int) {
	n := h.Cols / BlockSize
	if !haveWide || n == 0 || nr <= 0 {
		return 0, 0
	}
	if nr > 1 && n*BlockSize != h.Cols {
		panic("lossless12: decodeRowsWide of several rows with a short block")
	}
	rb := int(h.RowBytes())
	nb := int(blocks(int64(h.Cols)))
	_ = rows[(nr-1)*rb+int(h.RowBytes())-1]
	_ = dst[2*h.Cols*(nr-1)+2*BlockSize*n-1]
	return n, decodeRows512(&rows[0], nb, nb+h.Cols, nb+h.Cols+(h.Cols+1)/2, rb, &dst[0], n, nr)
}
