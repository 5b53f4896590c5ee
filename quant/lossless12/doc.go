// Package lossless12 stores bfloat16 matrices in about 11.4 bits per weight
// without losing a bit, and multiplies them straight from those bytes with
// the same results as the bf16 matrix they came from (§6.11).
//
// Start with Encode, which turns little-endian bf16 bytes into the format,
// and Open, which checks encoded bytes and returns a *Matrix whose MatVec and
// MatMul equal, bit for bit, internal/kernels/dot's bf16 kernels on the
// original weights. Measure reports what a matrix would cost before it is
// encoded. Package quant registers the format as "lossless12" and wraps
// *Matrix as a quant.Matrix.
//
// # Layout
//
// A bf16 weight is a sign bit, an 8-bit exponent and a 7-bit mantissa. The
// sign and mantissa are stored as one byte per weight; the exponent is stored
// as a 3-bit index into a window of 7 consecutive exponents chosen per block
// of 64 weights of a row, kept as three bit planes, and index 7 marks an
// escape whose exponent byte sits in a per-row escape area. Every row has the
// same number of escape bytes (the most any row of the matrix needs), so
// every row has the same length and a row range is one contiguous byte
// range. The choice of window is fixed by the weights (its top is the
// block's largest exponent), so each matrix has exactly one encoding, and
// Open refuses any other.
//
// # Errors
//
// Open and ParseHeader refuse malformed bytes with a *MalformedError (matching
// ErrMalformed) naming the row and block; Encode refuses inputs whose length
// does not match the shape with ErrShape. No byte of a matrix that Open did
// not accept is ever decoded into a weight.
//
// # Kernels
//
// MatVec and MatMul decode a chunk of rows (at most 256 KiB) into bf16 and
// reduce it with the bf16 kernels of internal/kernels/dot, so every output
// equals the bf16 matrix's at every SIMD level. With AVX2, and with
// AVX-512 (BW and VBMI) a block at a time, the decoder is assembly, escapes
// included; its pure-Go twin (the purego build tag, GODEBUG=cpu.avx2=off,
// other architectures) gives the same bytes, which the tests check on every
// matrix they use.
//
// It is a leaf package: it imports nothing model-specific and nothing from
// the rest of quant.
package lossless12
