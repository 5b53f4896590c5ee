// Package mxfp4 decodes, encodes and multiplies OCP MX FP4 matrices (E2M1
// codes in nibbles, one E8M0 power-of-two scale per 32 consecutive elements of
// a row), the format in which Kimi K3 ships its routed experts.
//
// It is a leaf package: it imports nothing model-specific and nothing from the
// rest of quant (quant wraps it as a quant.Matrix). It must never import
// config, attention, moe, safetensors or the root k3 package.
//
// # Layout
//
// A logical [rows, cols] matrix is stored as rows·cols/2 packed bytes and
// rows·cols/32 scale bytes, both row-major. Element (r, c) is the low nibble
// (bits 0–3) of byte r·cols/2 + c/2 when c is even and the high nibble when c
// is odd; its scale is byte r·cols/32 + c/32. cols must be a multiple of 32.
// Check validates flat buffer lengths and CheckShapes validates 2-D tensor
// shapes; both return errors that match the Err* sentinels with errors.Is.
//
// # Values
//
// Code k (bit 3 = sign) means E2M1(k): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives (code 8 is −0). Scale byte s means 2^(s−127) for s in [1, 254];
// s = 0 means 2^−127 (the float32 subnormal 0x00400000), as OCP specifies.
// s = 255, NaN in OCP, is pinned by this library: such a group contributes
// exactly nothing. The kernels skip it, so NaN or Inf activations in its
// columns do not reach the output, and the dequantiser writes +0 there. Every
// such group is counted in Stats.NaNScaleGroups, returned by the *Stats
// variants of each operation (no global counters), so a caller can log or
// refuse such tensors. Colibrì decodes 0 → +0 and 255 → +Inf; this package
// deliberately follows the oracle and kimi-k3-in-c instead.
//
// E2M1(k)·2^(s−127) is exact in float64. Dequantize rounds it once to float32,
// which is exact except that s = 254 with |E2M1| ≥ 2 (and s = 253 with
// |E2M1| ≥ 4) overflows to ±Inf; the kernels never form the float32 weight
// and so do not overflow there.
//
// # Reduction (§5.2, RG)
//
// MatVec computes each output row with the canonical grouped reduction: per
// 32-element group, eight float64 lanes (element j of the group goes to lane
// j mod 8, lanes summed in ascending j from +0), reduced as
// ((s0+s4)+(s1+s5))+((s2+s6)+(s3+s7)); then acc += sub·scale over the groups
// in order, and the result is float32(acc). Every E2M1·float32 product is
// exact in float64, so the SIMD path may fuse multiplies into adds; it keeps
// the lane partition and the tree, and its output equals the pure-Go path bit
// for bit (tests run both). The only unspecified bits are NaN payloads: where
// one path yields NaN the other does too.
//
// MatMul multiplies n activation rows and returns, element by element, what
// MatVec returns for each. Rows are independent, so callers split work across
// goroutines by slicing (see RowRange); no reduction is ever split.
//
// # Implementations
//
// Three kernels give identical bits; the fastest one the CPU supports is
// chosen once at start-up from golang.org/x/sys/cpu flags:
//
//   - AVX-512 (AVX512F, BW, VL and POPCNT): eight groups at a time, one
//     group per float64 lane of a ZMM register, so the RG lanes of a group
//     sit in eight registers and the RG tree is seven vertical adds. A
//     weight is decoded by a permute that looks its nibble up in the table
//     of the sixteen float64 E2M1 values (VPERMI2PD for the code in bits
//     0–3 of a lane, VPERMPS for the one in bits 32–35, so one shift serves
//     two lookups); the activations are stored transposed to match. MatMul
//     decodes each weight once for four (or two) activation rows; from
//     five activation rows on it instead decodes eight weight rows at a
//     time into a float64 panel, one row per lane, and passes three
//     activation rows over it, each group's tree, scale and sum vertical
//     over the eight rows (gemm_avx512_amd64.go).
//   - AVX2 (AVX2, FMA and POPCNT): one group at a time; the nibbles are
//     expanded with VPSHUFB straight into the upper 16 bits of float64
//     lanes (every E2M1 value is a float64 whose lower 48 bits are zero).
//   - the pure-Go twin: the reference, and the kernel under the purego
//     build tag, on other architectures and on CPUs without AVX2.
//
// None converts a weight from an integer, and only the packed form
// materialises (unscaled) weights, a block of rows at a time: the
// activations are widened to float64 once per call (in the order the kernel
// consumes them) and the weights are read straight from their nibbles.
// The exact float64 arithmetic costs 32 products per 16 bytes, so even the
// AVX-512 kernel is bound by shuffles and multiply-adds rather than by
// memory bandwidth: on the development machine it reaches about half of a
// plain read loop's bandwidth when the weights stream from DRAM, as routed
// experts do, and about a quarter when they sit in cache
// (BenchmarkMatVecCold, BenchmarkMatVec).
//
// # Quantiser
//
// Quantize implements the oracle's rule (§6.2) for writers and tests:
// per block e = ⌊log2(max(amax, 1e−30))⌋ − 2, scale byte e+127, each element
// rounded to the nearest E2M1 magnitude of |w|/2^e with ties going to the
// smaller code. The sign bit is set exactly when w < 0 and the magnitude code
// is nonzero, so a zero magnitude always encodes as code 0 (+0), whatever the
// sign of w: code 8 (−0) is never written. This is what a nearest-value search
// over the signed table with ties to the smaller code yields, and it matches
// the oracle's output (its tiny-model experts contain no code 8).
// Non-finite weights and matrices whose codes would all be ±0 are refused.
package mxfp4
