// Package floatbits widens the narrow floating-point encodings found in
// checkpoints — bfloat16, IEEE binary16, and the OCP FP8 formats E4M3-FN and
// E5M2 — to float32, exactly (§5.1, §6.4), and narrows float32 to binary16
// (ToF16, nearest even).
//
// It is the single implementation behind safetensors' ReadF32 converters,
// the pure-Go twins of internal/kernels/dot and quant's decoders, so the three can
// never disagree about a bit pattern; ToF16 is the one binary16 encoder, behind
// quant.F32ToF16 (which makes NaNs canonical) and nn.Narrow (which keeps a gain
// in two bytes when every value round-trips). It is a leaf: it imports only the
// standard library and must never import anything of this module.
package floatbits
