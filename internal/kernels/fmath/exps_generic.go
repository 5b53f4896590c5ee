//go:build !amd64 || purego

package fmath

// expBlocks computes no block: Exp64s does every element with Exp64.
func expBlocks(dst, x []float64) int { return 0 }

// tanhBlocks computes no block: Tanh64s does every element with Tanh64.
func tanhBlocks(dst, x []float64) int { return 0 }

func widenBlocks(e []float64, x []float32, neg bool) int { return 0 }

func narrowBlocks(dst []float32, e []float64, sigmoid bool) int { return 0 }
