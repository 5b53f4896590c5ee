//go:build !amd64 || purego

package nn

func (s *ShortConv) convKernel4(dst, buf []float32, n, b0, nb int) bool { return false }
