//go:build amd64 && !purego

package nn

//go:noescape
func convBlock4(dst *float32, dstride int, buf *float32, w *float32, wstride int, T int)

// convKernel4 is convRows on AVX-512 for a full block of convBlock channels
// and kernel 4 (three history rows); it reports false, doing nothing,
// otherwise.
func (s *ShortConv) convKernel4(dst, buf []float32, n, b0, nb int) bool {
	c := s.c
	if !useAVX512 || s.k != 4 || nb != convBlock {
		return false
	}
	_ = dst[(n-1)*c+convBlock-1]
	_ = buf[(n+3)*convBlock-1]
	convBlock4(&dst[0], 4*c, &buf[0], &s.wt[b0], 4*c, n)
	return true
}
