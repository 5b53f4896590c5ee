package checkpoint

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// normals draws approximately standard-normal values: the sum of four 16-bit uniforms of one
// 64-bit PCG output, centred and scaled to unit variance (tails end at ±2√3). Only integer and
// IEEE-exact float operations are used (no math.Log or math.Cos, whose last bit may differ
// between CPUs), so the stream is identical on every platform and Go version.
type normals struct{ pcg *rand.PCG }

// newNormals seeds a stream from the checkpoint seed and an FNV-1a hash of a tensor (or matrix)
// name: every tensor has its own stream, so the order in which tensors are drawn does not matter.
func newNormals(seed int64, name string) *normals {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &normals{pcg: rand.NewPCG(uint64(seed), h.Sum64())}
}

// invSigma16 converts a centred sum of four 16-bit uniforms to unit variance:
// Var = 4·(65536²−1)/12 ≈ 65536²/3.
var invSigma16 = math.Sqrt(3) / 65536

func (n *normals) next() float64 {
	v := n.pcg.Uint64()
	s := (v & 0xffff) + (v >> 16 & 0xffff) + (v >> 32 & 0xffff) + (v >> 48)
	return (float64(s) - 2*65535) * invSigma16
}

// uniform returns a value in [0, 1).
func (n *normals) uniform() float64 {
	return float64(n.pcg.Uint64()>>11) / (1 << 53)
}
