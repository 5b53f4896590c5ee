package moe

import (
	"fmt"

	"github.com/k3-project/k3/quant"
)

// Expert is one routed expert E(z) = W2·SiTU-GLU(W1 z, W3 z): W1 (gate) and
// W3 (up) are [I, ℓ], W2 (down) is [ℓ, I]. Any quant format works (MXFP4 in
// the checkpoint, f32 in the operator fixtures).
type Expert struct {
	W1, W3, W2 quant.Matrix
}

// ExpertSource supplies routed experts. Experts appends the experts ids of
// layer, in the order of ids, to dst[:0] (so a caller that keeps dst between
// calls allocates nothing per token) and returns that slice with a release function the caller calls
// exactly once when it no longer uses them (a cache may then evict them).
// A failure should name the layer and expert (the expert cache's error type
// does); the forward pass fails with it, wrapped. Implementations must be safe
// for concurrent use.
type ExpertSource interface {
	Experts(layer int, ids []int, dst []Expert) ([]Expert, func(), error)
}

// MemExperts is an in-memory ExpertSource: every expert of every layer is
// resident. It is immutable and safe for concurrent use.
type MemExperts struct {
	layers map[int][]Expert
}

// NewMemExperts returns a source serving layers[layer][id]. The map is not
// copied; do not modify it afterwards.
func NewMemExperts(layers map[int][]Expert) *MemExperts {
	return &MemExperts{layers: layers}
}

// Experts implements ExpertSource.
func (m *MemExperts) Experts(layer int, ids []int, dst []Expert) ([]Expert, func(), error) {
	all, ok := m.layers[layer]
	out := dst[:0]
	for _, id := range ids {
		if !ok {
			return nil, nil, fmt.Errorf("moe: no experts for layer %d", layer)
		}
		if id < 0 || id >= len(all) {
			return nil, nil, fmt.Errorf("moe: layer %d: expert id %d outside [0, %d)", layer, id, len(all))
		}
		out = append(out, all[id])
	}
	return out, func() {}, nil
}

// BatchLimiter is implemented by an ExpertSource that can hand out at most
// MaxBatch experts per Experts call, such as a cache whose slots must hold
// every expert leased at once. For a chunk whose union of picks is larger,
// the layer fetches, computes and releases the union in waves of at most
// MaxBatch experts, in order of first appearance; the output is
// bit-identical to a single wave. MaxBatch ≤ 0 means no limit.
type BatchLimiter interface {
	MaxBatch() int
}

// WaveOverlapper is implemented by a BatchLimiter that can serve a second
// Experts call of a layer while the experts of the first are still leased,
// as long as the two together lease at most MaxBatch experts (an expert
// cache without a cache, whose read scratch is taken slot by slot). When
// OverlapWaves reports true, a layer whose union needs more than
// ⌊MaxBatch/2⌋ experts fetches it in half-waves of ⌊MaxBatch/2⌋ and leases
// each half-wave while the previous one runs, so the source's reads overlap
// the compute; the output is bit-identical to a single wave.
type WaveOverlapper interface {
	OverlapWaves() bool
}
