// Package moe implements Kimi K3's feed-forward blocks (§4.7, §4.8):
// the sigmoid router with a selection-only correction bias, the Stable
// LatentMoE body (full-width router, latent down-projection, routed experts
// E(z) = W2·SiTU-GLU(W1 z, W3 z) accumulated in pick order, RMSNorm on the
// aggregate, up-projection, plus the fused shared expert on the original
// input), and the dense SiTU-GLU MLP of the first layers.
//
// Routed experts are obtained through ExpertSource, so an in-memory set
// (MemExperts) and a disk-backed cache are interchangeable without touching
// the math; an expert that cannot be loaded fails the forward pass with the
// source's error, wrapped. Experts may be any quant.Matrix (MXFP4 in the released
// checkpoint, f32 in the operator fixtures).
//
// For T > 1 positions the experts are fetched once for the union of the
// chunk's picks and each expert runs as one mat-mul over the positions that
// picked it; every position's outputs are still summed in its own pick order,
// so the result is bit-identical to routing the positions one at a time
// (§4.10, E1) and to any worker count. A source implementing
// BatchLimiter gets the union in waves of at most MaxBatch experts, with the
// same result; one that is also a WaveOverlapper gets half-waves, each
// leased on another goroutine while the previous one runs, so that its
// reads overlap the compute (§9.2).
//
// Scratch memory comes from a Workspace: ForwardRoutedWith and
// Dense.ForwardWith take one from the caller (one per goroutine, shareable
// by all layers), Forward borrows one from a pool inside the layer. With
// Workers > 1 the distinct experts of a call run on different goroutines
// (each expert whole on one), and their outputs are summed afterwards in
// pick order.
//
// The package imports quant, internal/kernels/fmath, internal/kernels/nn and
// internal/kernels/parallel; it must never import attention, config, safetensors or
// the root package.
package moe
