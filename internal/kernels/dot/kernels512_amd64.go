//go:build amd64 && !purego

package dot

// AVX-512 kernels (kernels512_amd64.s), same contract as the AVX2 ones in
// kernels_amd64.go. The four-way forms write their results to r. The bf16
// four-row kernel prefetches pf bytes ahead of each row pointer (see
// rowsPrefetch); the f32 and f16 ones take pf for the shared signature and
// keep a fixed distance. Prefetching never changes a result.

//go:noescape
func bf16Rows1x512(w *byte, x *float64, m int) float64

//go:noescape
func bf16Rows2x512(w0, w1 *byte, x *float64, m int) (r0, r1 float64)

//go:noescape
func bf16Rows4x512(w0, w1, w2, w3 *byte, x *float64, m int, r *[4]float64, pf int)

//go:noescape
func bf16Xs2x512(w *byte, x0, x1 *float64, m int) (r0, r1 float64)

//go:noescape
func bf16Xs4x512(w *byte, x0, x1, x2, x3 *float64, m int, r *[4]float64)

//go:noescape
func f32Rows1x512(w *byte, x *float64, m int) float64

//go:noescape
func f32Rows2x512(w0, w1 *byte, x *float64, m int) (r0, r1 float64)

//go:noescape
func f32Rows4x512(w0, w1, w2, w3 *byte, x *float64, m int, r *[4]float64, pf int)

//go:noescape
func f32Xs2x512(w *byte, x0, x1 *float64, m int) (r0, r1 float64)

//go:noescape
func f32Xs4x512(w *byte, x0, x1, x2, x3 *float64, m int, r *[4]float64)

//go:noescape
func f16Rows1x512(w *byte, x *float64, m int) float64

//go:noescape
func f16Rows2x512(w0, w1 *byte, x *float64, m int) (r0, r1 float64)

//go:noescape
func f16Rows4x512(w0, w1, w2, w3 *byte, x *float64, m int, r *[4]float64, pf int)

//go:noescape
func f16Xs2x512(w *byte, x0, x1 *float64, m int) (r0, r1 float64)

//go:noescape
func f16Xs4x512(w *byte, x0, x1, x2, x3 *float64, m int, r *[4]float64)

// bf16R2Xs4x512 adds to acc the lane partials of weight rows i (w0, w1)
// against activation rows t (x0..x3) over m columns, output 4i+t at
// acc[16(4i+t):16(4i+t+1)]; acc starts at zero and carries the partials
// between column blocks.
//
//go:noescape
func bf16R2Xs4x512(w0, w1 *byte, x0, x1, x2, x3 *float64, m int, acc *[128]float64)

// bf16Reduce8x512 writes to r[o] the R16 head of output o's partials in acc.
//
//go:noescape
func bf16Reduce8x512(acc *[128]float64, r *[8]float64)
