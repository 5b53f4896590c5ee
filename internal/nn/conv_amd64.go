//go:build amd64 && !purego

package nn

//go:noescape
func convBlock4(dst *float32, dstride int, buf *float32, w *float32, wstride int, T int)

// convRun is the positions convKernel4 stages at a time.
const convRun = 64

// convKernel4 is the accumulation of channels for one full block of
// convBlock channels from b0 when the kernel is 4 (three history rows) and
// the CPU has AVX-512; it reports false, doing nothing, otherwise. The
// history and up to convRun positions' inputs are staged as consecutive rows
// of a stack buffer (so dst may alias x), and convBlock4 runs over them.
func (s *ShortConv) convKernel4(dst, x, tail []float32, T, b0 int) bool {
	const m = 3
	c := s.c
	if !useAVX512 || s.k != m+1 || b0+convBlock > c {
		return false
	}
	var buf [(m + convRun) * convBlock]float32
	for j := range m {
		for i := range convBlock {
			buf[j*convBlock+i] = tail[(b0+i)*m+j]
		}
	}
	for t0 := 0; t0 < T; t0 += convRun {
		n := min(convRun, T-t0)
		for t := range n {
			copy(buf[(m+t)*convBlock:(m+t+1)*convBlock], x[(t0+t)*c+b0:(t0+t)*c+b0+convBlock])
		}
		_ = dst[(t0+n-1)*c+b0+convBlock-1]
		convBlock4(&dst[t0*c+b0], 4*c, &buf[0], &s.wt[b0], 4*c, n)
		copy(buf[:m*convBlock], buf[n*convBlock:(n+m)*convBlock]) // the last m rows are the next history
	}
	for j := range m {
		for i := range convBlock {
			tail[(b0+i)*m+j] = buf[j*convBlock+i]
		}
	}
	return true
}
