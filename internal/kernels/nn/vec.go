package nn

import "github.com/k3-project/k3/internal/kernels/fmath"

// Add sets dst_i = a_i ⊕ b_i (f32). dst may alias a or b.
func Add(dst, a, b []float32) {
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v + b[i]
	}
}

// MulSigmoid sets dst_i = x_i ⊗ σ(g_i), the sigmoid output gate of KDA and
// MLA. dst may alias x or g.
func MulSigmoid(dst, x, g []float32) {
	g = g[:len(x)]
	dst = dst[:len(x)]
	var s [sigChunk]float32 // σ(g) of a chunk, from the vector exp
	for lo := 0; lo < len(x); lo += sigChunk {
		hi := min(lo+sigChunk, len(x))
		fmath.Sigmoid32s(s[:hi-lo], g[lo:hi])
		for i, v := range x[lo:hi] {
			dst[lo+i] = v * s[i]
		}
	}
}

// sigChunk is the run of sigmoids the elementwise functions take from
// fmath's slice forms at a time (a buffer on the stack).
const sigChunk = 64
