package nn

import "math/rand/v2"

// randVec draws n values from a normal distribution of deviation s.
func randVec(r *rand.Rand, n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * s)
	}
	return v
}
