//go:build !amd64 || purego

package fmath

// expBlocks computes no block: Exp64s does every element with Exp64.
func expBlocks(dst, x []float64) int { return 0 }
