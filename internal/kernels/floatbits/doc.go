// Package floatbits widens the narrow floating-point encodings found in
// checkpoints — bfloat16, IEEE binary16, and the OCP FP8 formats E4M3-FN and
// E5M2 — to float32, exactly (§5.1, §6.4).
//
// It is the single implementation behind safetensors' ReadF32 converters,
// the pure-Go twins of internal/kernels/dot and quant's decoders, so the three can
// never disagree about a bit pattern. It is a leaf: it imports only the
// standard library and must never import anything of this module.
package floatbits
