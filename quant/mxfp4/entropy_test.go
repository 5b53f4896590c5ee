package mxfp4

import "math"

// nibbleEntropy returns the order-0 (empirical) entropy of the 4-bit codes in
// packed, in bits per code: how far an entropy coder could shrink them
// (§6.10). It returns 0 for empty input.
func nibbleEntropy(packed []byte) float64 {
	var n [16]int
	for _, b := range packed {
		n[b&15]++
		n[b>>4]++
	}
	return entropy(n[:], 2*len(packed))
}

// byteEntropy is the order-0 entropy of bytes in bits per byte.
func byteEntropy(b []byte) float64 {
	var n [256]int
	for _, v := range b {
		n[v]++
	}
	return entropy(n[:], len(b))
}

func entropy(counts []int, total int) float64 {
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(total)
			h -= p * math.Log2(p)
		}
	}
	return h
}
