package testkit

import "math/rand/v2"

// Gaussian draws n float32 values from a normal distribution of deviation s,
// in order, so a test's values (and a digest recorded from them) depend only
// on r's seed and the order of the draws.
func Gaussian(r *rand.Rand, n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * s)
	}
	return v
}

// RandomBytes draws n uniformly random bytes, one draw of r each.
func RandomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
