// Package attention implements the two token mixers of Kimi K3 (§4.5,
// §4.6): Kimi Delta Attention (KDA), a gated linear-attention recurrence with
// per-channel decay and causal short convolutions, and gated Multi-head
// Latent Attention (MLA) with NoPE, computed in the absorbed formulation over
// a latent cache.
//
// Each mixer is an immutable, goroutine-safe binding of weights (KDA, MLA)
// plus an explicit per-sequence state (KDAState, MLACache) that the caller
// owns, clones for snapshots and resets. Forward processes T ≥ 1 new
// positions at once; the result is bit-identical to processing the same
// positions one at a time or in any chunks (§4.10, E1), and to any
// worker count: parallelism only splits independent outputs (mat-vec rows,
// heads), never a reduction.
//
// Scratch memory comes from a Workspace: ForwardWith takes one from the
// caller (one per goroutine, shareable by all layers that goroutine runs),
// Forward borrows one from a pool inside the layer. With a reused Workspace
// a one-worker decode step allocates nothing in this package.
//
// Weights are quant.Matrix values (any format; projections of T positions
// use MatMul so each weight is read once per call); small vectors are
// []float32. The floating-point evaluation order follows §5.3; where the
// spec leaves it to the implementation (the absorbed MLA) the order is
// documented on MLA.Forward.
//
// The package imports quant, internal/kernels/dot, internal/kernels/fmath, internal/kernels/nn,
// internal/kernels/parallel and golang.org/x/sys/cpu (kernel choice); it must never
// import moe, config, safetensors or the root package.
package attention
