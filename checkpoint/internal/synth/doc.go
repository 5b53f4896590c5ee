// Package synth writes synthetic Kimi K3 checkpoints: random weights in the released layout (nested
// config.json, shards with model.safetensors.index.json, BF16 matrices, F32 small vectors, MXFP4
// routed experts quantised with the oracle's rule), for tests, benchmarks and the demo.
//
// Output is a pure function of (geometry, seed): every tensor draws from its own PCG stream seeded
// with the seed and an FNV-1a hash of its name, through a platform-independent approximately
// normal generator (a sum of four uniforms; no math.Log or math.Cos, whose last bit varies by
// CPU), so the same seed gives identical bytes on every machine and Go version.
//
// Scales are chosen so that the model is not degenerate: SiTU-GLU gate and up projections are
// large enough for both tanh caps to saturate on part of the inputs, the router correction bias is
// large enough to change expert selections, AttnRes pseudo-queries give non-uniform mixtures, and
// logits have a spread of a few units so that greedy decoding has clear winners.
//
// Shards are streamed tensor by tensor through the safetensors writer's Fill callbacks; tensors are
// drawn a few at a time ahead of the writer on GOMAXPROCS goroutines, and the largest ones (the
// embedding and lm_head) are streamed in blocks of rows, so memory stays bounded. The k3 geometry
// writes headers only: its 1.56 TB of data stay holes (zeros) in sparse files.
//
// The package imports config, safetensors, quant (bf16 rounding) and quant/mxfp4; it must never import the root package,
// attention or moe (package checkpoint exposes it as Synthesize).
package synth
