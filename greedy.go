package k3

// Argmax returns the greedy pick of SPEC §4.9: the first index holding the maximum logit, found
// with a strict > scan from index 0, never a NaN. It returns ErrAllNaN when every logit is NaN
// and ErrNoLogits for an empty slice.
func Argmax(logits []float32) (int, error) {
	if len(logits) == 0 {
		return 0, ErrNoLogits
	}
	best := -1
	var bv float32
	for i, v := range logits {
		if v != v { // NaN
			continue
		}
		if best < 0 || v > bv {
			best, bv = i, v
		}
	}
	if best < 0 {
		return 0, ErrAllNaN
	}
	return best, nil
}
