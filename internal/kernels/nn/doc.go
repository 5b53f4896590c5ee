// Package nn holds the small numeric building blocks shared by the model's
// layers: RMSNorm and L2Norm, SiTU-GLU, softmax, the causal depthwise short
// convolution with fused SiLU and carried tail state, Attention Residuals
// (AttnRes) aggregation, and the per-layer residual wiring of §4.3.
//
// Every function follows the evaluation order of §5.3 exactly: sums of
// squares, scores and softmax denominators are sequential float64 sums (RS);
// every float32 product that feeds an addition is written acc + float32(a*b)
// so that the compiler cannot fuse it into an FMA on any GOARCH. The results
// are therefore bit-identical across machines, worker counts and the way the
// positions of a sequence are split into calls (§5.6, E1). On amd64
// with AVX-512, SiTU-GLU's float32 statements and the kernel-4 short
// convolution's accumulation run sixteen lanes at a time in assembly, one
// instruction per scalar statement with the same first operand, so the bits
// are those of the Go loops (which the tests compare them with).
//
// Activations are row-major []float32 ([T][width] for T positions). The
// package imports only internal/kernels/fmath, internal/kernels/floatbits,
// internal/kernels/parallel and golang.org/x/sys/cpu; it must never import
// attention, moe, config, quant, safetensors or the root package.
package nn
