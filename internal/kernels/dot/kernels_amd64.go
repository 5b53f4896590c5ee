//go:build amd64 && !purego

package dot

// Assembly kernels (kernels_amd64.s). m > 0 is a multiple of 16; x points at
// m pre-widened activations in the format's lane layout; the result is the
// R16 tree over the first m elements, before the tail.

//go:noescape
func bf16Rows1(w *byte, x *float64, m int) float64

//go:noescape
func bf16Rows2(w0, w1 *byte, x *float64, m int) (r0, r1 float64)

//go:noescape
func bf16Xs2(w *byte, x0, x1 *float64, m int) (r0, r1 float64)

//go:noescape
func bf16R3Xs4(w0, w1, w2 *byte, x0, x1, x2, x3 *float64, m int, acc *[192]float64, pf int)

//go:noescape
func bf16Reduce12(acc *[192]float64, r *[12]float64)

// fmaPeakAVX2 runs n rounds of 12 independent ymm FMAs (BenchmarkFMAPeak's
// AVX2 ceiling; no other use).
func fmaPeakAVX2(n int)

// bf16Xs4 is one weight row against four activation rows at the AVX2 level:
// the three-row kernel with the row given thrice. It runs only for the last
// rows of a matrix whose row count is not a multiple of three, where doing
// their multiply-adds again is cheaper than another kernel.
func bf16Xs4(w *byte, x0, x1, x2, x3 *float64, m int, r *[4]float64) {
	var acc [192]float64
	var h [12]float64
	bf16R3Xs4(w, w, w, x0, x1, x2, x3, m, &acc, 0)
	bf16Reduce12(&acc, &h)
	copy(r[:], h[:4])
}

//go:noescape
func f32Rows1(w *byte, x *float64, m int) float64

//go:noescape
func f32Rows2(w0, w1 *byte, x *float64, m int) (r0, r1 float64)

//go:noescape
func f32Xs2(w *byte, x0, x1 *float64, m int) (r0, r1 float64)

//go:noescape
func f16Rows1(w *byte, x *float64, m int) float64

//go:noescape
func f16Rows2(w0, w1 *byte, x *float64, m int) (r0, r1 float64)

//go:noescape
func f16Xs2(w *byte, x0, x1 *float64, m int) (r0, r1 float64)

// Activation layouts the kernels expect (see widen).
const (
	layoutNatural = iota // x in element order
	layoutBF16x2         // per 16: evens then odds of each half (AVX2 bf16)
	layoutBF16x5         // per 16: the 8 evens then the 8 odds (AVX-512 bf16)
)

// asmFormat bundles one weight format's kernels at one instruction-set level
// for the shared drivers. rows4 and r2xs4 are nil for the AVX2 kernels, and
// so are xs4 and r3xs4 but for bf16, the trunk's format.
type asmFormat struct {
	name   string
	size   int
	layout int
	rows1  func(w *byte, x *float64, m int) float64
	rows2  func(w0, w1 *byte, x *float64, m int) (float64, float64)
	xs2    func(w *byte, x0, x1 *float64, m int) (float64, float64)
	rows4  func(w0, w1, w2, w3 *byte, x *float64, m int, r *[4]float64, pf int)
	xs4    func(w *byte, x0, x1, x2, x3 *float64, m int, r *[4]float64)
	tail   func(acc float64, w []byte, x []float32, from int) float64
	dot    func(w []byte, x []float32) float32 // pure-Go twin, for cols < 16
	// r2xs4 is two weight rows against four activation rows, accumulating
	// unreduced lane partials in acc across column blocks; reduce8 turns
	// them into the eight heads (r[4i+t]). Both nil where no such kernel
	// exists.
	r2xs4   func(w0, w1 *byte, x0, x1, x2, x3 *float64, m int, acc *[128]float64)
	reduce8 func(acc *[128]float64, r *[8]float64)
	// r3xs4 and reduce12 are r2xs4 and reduce8 for three weight rows (its
	// twelve outputs r[4i+t]), where two rows' eight accumulator chains
	// leave the FMA pipes idle (AVX2, which has only this one); nil elsewhere.
	// It prefetches the lines pf bytes past its rows (with 0 its own, to no
	// purpose: bf16Xs4 passes that).
	r3xs4    func(w0, w1, w2 *byte, x0, x1, x2, x3 *float64, m int, acc *[192]float64, pf int)
	reduce12 func(acc *[192]float64, r *[12]float64)
	// panel widens a weight row into gemmMatMul's panel; nil where the
	// packed mat-mul does not run (AVX2).
	panel func(dst *float64, w *byte, m, hi int)
	// panel4 is panel for four adjacent rows rb bytes apart, storing the
	// contiguous 256 bytes per column block the kernel reads rather than
	// one line in four per call (-bench GemmPanel: x4 against row); nil
	// where only panel exists.
	panel4 func(dst *float64, w *byte, rb int, m, hi int)
}

var (
	fmtF32  = &asmFormat{"f32/avx2", sizeF32, layoutNatural, f32Rows1, f32Rows2, f32Xs2, nil, nil, tailF32, genericF32, nil, nil, nil, nil, nil, nil}
	fmtBF16 = &asmFormat{"bf16/avx2", sizeBF16, layoutBF16x2, bf16Rows1, bf16Rows2, bf16Xs2, nil, bf16Xs4, tailBF16, genericBF16, nil, nil, bf16R3Xs4, bf16Reduce12, nil, nil}
	fmtF16  = &asmFormat{"f16/avx2", sizeF16, layoutNatural, f16Rows1, f16Rows2, f16Xs2, nil, nil, tailF16, genericF16, nil, nil, nil, nil, nil, nil}

	fmtF32x512 = &asmFormat{"f32/avx512", sizeF32, layoutNatural,
		f32Rows1x512, f32Rows2x512, f32Xs2x512, f32Rows4x512, f32Xs4x512, tailF32, genericF32, nil, nil, nil, nil, f32Panel512, nil}
	fmtBF16x512 = &asmFormat{"bf16/avx512", sizeBF16, layoutBF16x5,
		bf16Rows1x512, bf16Rows2x512, bf16Xs2x512, bf16Rows4x512, bf16Xs4x512, tailBF16, genericBF16, bf16R2Xs4x512, bf16Reduce8x512, nil, nil, bf16Panel512, bf16Panel512x4}
	fmtF16x512 = &asmFormat{"f16/avx512", sizeF16, layoutNatural,
		f16Rows1x512, f16Rows2x512, f16Xs2x512, f16Rows4x512, f16Xs4x512, tailF16, genericF16, nil, nil, nil, nil, f16Panel512, nil}
)
