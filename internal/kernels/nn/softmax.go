package nn

import (
	"math"

	"github.com/k3-project/k3/internal/kernels/fmath"
)

// Softmax sets p = softmax(score) as §5.3 fixes it: m = max(score) in
// f32 from −∞; e_s = f32(exp(f64(score_s ⊖ m))); Z = RS(e_s) in f64;
// p_s = f32(f64(e_s)/Z). p may alias score. An empty list is a no-op.
func Softmax(p, score []float32) {
	if len(score) == 0 {
		return
	}
	m := float32(math.Inf(-1))
	for _, s := range score {
		if s > m {
			m = s
		}
	}
	p = p[:len(score)]
	var z float64
	for i, s := range score {
		e := float32(fmath.Exp64(float64(s - m)))
		p[i] = e
		z += float64(e)
	}
	for i, e := range p {
		p[i] = float32(float64(e) / z)
	}
}
