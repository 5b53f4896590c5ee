package nn

import "github.com/k3-project/k3/internal/fmath"

// SiTUGLU sets dst_i = [β1·tanh(g_i/β1)·σ(g_i)] · [β2·tanh(u_i/β2)] (SPEC
// §4.1), evaluated as §5.3 fixes it:
//
//	t1 = g ⊘ β1; a = (β1 ⊗ tanh32(t1)) ⊗ σ(g); t3 = u ⊘ β2; c = β2 ⊗ tanh32(t3); y = a ⊗ c
//
// The sigmoid takes the uncapped gate g. |y| < β1·β2. dst may alias g or u.
func SiTUGLU(dst, g, u []float32, beta1, beta2 float32) {
	// Per element, not through fmath.Sigmoid32s: measured, the loop of the
	// two tanh alone ran slower than this one with the scalar sigmoid
	// between them, and the vector form lost 1.6× on the whole.
	u = u[:len(g)]
	dst = dst[:len(g)]
	for i, gv := range g {
		a := (beta1 * fmath.Tanh32(gv/beta1)) * fmath.Sigmoid32(gv)
		c := beta2 * fmath.Tanh32(u[i]/beta2)
		dst[i] = a * c
	}
}
