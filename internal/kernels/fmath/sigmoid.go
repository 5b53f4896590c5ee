package fmath

// Sigmoid32 returns σ(x) = 1/(1+e^(−x)) evaluated as §5.3 fixes it:
// e = f32(exp64(−x)), then 1 ⊘ (1 ⊕ e) in float32. For large negative x, e
// overflows to +Inf and σ becomes +0 (never NaN); for large positive x, σ = 1.
func Sigmoid32(x float32) float32 {
	e := float32(Exp64(-float64(x)))
	return 1 / (1 + e)
}

// SiLU32 returns x ⊗ σ(x) (§5.3).
func SiLU32(x float32) float32 {
	return x * Sigmoid32(x)
}
