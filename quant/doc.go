// Package quant multiplies weight matrices kept in their on-disk encodings
// (f32, bf16, f16, int8-row, int4-row, int4-grouped, fp8-e4m3-b128, mxfp4,
// and lossless12, bf16 weights in about 11.4 bits) straight from the packed
// bytes, and decides from byte arithmetic and metadata stamps which encoding
// an untrusted tensor holds.
//
// It is model-agnostic: it must never import config, attention, moe,
// safetensors, tokenizer or the root k3 package. Tensor dtypes are passed as
// their safetensors names ("U8", "F32", "F8_E8M0", ...) for that reason.
//
// # Numerics
//
// Every kernel follows the canonical reductions of §5.2: R16 for f32,
// bf16, f16 and (followed by one f64 multiply by the row scale) int8-row and
// int4-row; RG for int4-grouped (g = gs), fp8-e4m3-b128 (g = 128) and mxfp4
// (g = 32). The partition and the order of the additions fix the result bit
// for bit, so MatMul equals MatVec element by element, row-parallel helpers
// equal the serial call, and SIMD paths equal their pure-Go twins.
//
// # Implementations
//
// f32, bf16 and f16 use internal/kernels/dot, mxfp4 uses quant/mxfp4 and
// lossless12 uses quant/lossless12 (which reduces with dot's R16, so its
// results are the bf16 matrix's); all have AVX2 assembly with pure-Go twins. int8-row, int4-row, int4-grouped and
// fp8-e4m3-b128 have AVX2+FMA assembly here (kernels_amd64.s), selected at
// start-up from the CPU flags and disabled by the purego build tag; the
// pure-Go twins (kernels_go.go) give bit-identical results, which the tests
// check on both paths. No kernel ever materialises the float matrix: weights
// are decoded in registers (or a group at a time) straight from the packed
// bytes; lossless12 decodes a chunk of rows (at most 256 KiB) back to bf16
// for the bf16 kernels.
//
// # Resolution
//
// Resolve implements §6.7: the logical shape comes from the model
// configuration, the byte counts and dtypes from the container, and the
// result is either a format with exact byte counts or a named error carrying
// the observed and expected numbers. Stamps (§6.8) only break ties; they
// never grant a decoder this build lacks.
//
// # Entropy-coded containers
//
// Tensors stamped mxfp4-cfs1, int4-row-cfs1 or int4-grouped-cfs1 hold one
// CFS1 record (package quant/cfs1); ResolveCoded checks the declared length
// against the shape before allocating, decodes the record and resolves the
// decoded bytes as the base format. A scale tensor stamped mxfp4-scale-cfs1
// goes through DecodeScaleRecord. EncodeCoded and EncodeScaleRecord are the
// writer's side. Colibrì's int4-rans256-g0 (an optional decoder) is not in
// this build and is refused by name.
package quant
