package nn

import "github.com/k3-project/k3/internal/kernels/fmath"

// SiTUGLU sets dst_i = [β1·tanh(g_i/β1)·σ(g_i)] · [β2·tanh(u_i/β2)] (
// §4.1), evaluated as §5.3 fixes it:
//
//	t1 = g ⊘ β1; a = (β1 ⊗ tanh32(t1)) ⊗ σ(g); t3 = u ⊘ β2; c = β2 ⊗ tanh32(t3); y = a ⊗ c
//
// The sigmoid takes the uncapped gate g. |y| < β1·β2. dst may alias g or u.
func SiTUGLU(dst, g, u []float32, beta1, beta2 float32) {
	u = u[:len(g)]
	dst = dst[:len(g)]
	// A chunk at a time, its sigmoids and both tanh through fmath's vector
	// forms (the same bits as the scalar functions).
	var s [sigChunk]float32
	var t1, t3 [sigChunk]float64
	for lo := 0; lo < len(g); lo += sigChunk {
		hi := min(lo+sigChunk, len(g))
		gs, us := g[lo:hi], u[lo:hi]
		fmath.Sigmoid32s(s[:len(gs)], gs)
		for i := gluArgBlocks(t1[:], t3[:], gs, us, beta1, beta2); i < len(gs); i++ {
			t1[i] = float64(gs[i] / beta1)
			t3[i] = float64(us[i] / beta2)
		}
		fmath.Tanh64s(t1[:len(gs)], t1[:len(gs)])
		fmath.Tanh64s(t3[:len(gs)], t3[:len(gs)])
		d := dst[lo:hi]
		for i := gluOutBlocks(d, t1[:], t3[:], s[:], beta1, beta2); i < len(gs); i++ {
			a := (beta1 * float32(t1[i])) * s[i]
			c := beta2 * float32(t3[i])
			d[i] = a * c
		}
	}
}
