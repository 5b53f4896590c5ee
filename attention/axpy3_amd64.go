//go:build amd64 && !purego

package attention

//go:noescape
func axpy3x64(acc *float64, astride int, a *float64, ak int, b *float32, bstride int, k int)

// axpyBlock3Applies reports whether axpyBlock3 runs for rows of width w:
// it needs AVX-512 and w a multiple of 64.
func axpyBlock3Applies(w int) bool { return useAVX512 && w > 0 && w%64 == 0 }

// axpyBlock3 is axpyRows for three accumulator rows at once: for t < 3,
// acc[t·as : t·as+w] gets, for j < k in order, a[t·ak+j]·f64(b[j·bs+r]),
// r < w. The caller checks axpyBlock3Applies(w).
func axpyBlock3(acc []float64, as int, a []float64, ak int, b []float32, bs, k, w int) {
	_ = acc[2*as+w-1]
	if k == 0 {
		return
	}
	_ = a[2*ak+k-1]
	_ = b[(k-1)*bs+w-1]
	for c := 0; c < w; c += 64 {
		axpy3x64(&acc[c], 8*as, &a[0], 8*ak, &b[c], 4*bs, k)
	}
}
