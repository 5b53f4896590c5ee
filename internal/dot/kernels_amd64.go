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

// asmFormat bundles one weight format's kernels for the shared drivers.
type asmFormat struct {
	size  int
	perm  bool // x is laid out in the bf16 even/odd order
	rows1 func(w *byte, x *float64, m int) float64
	rows2 func(w0, w1 *byte, x *float64, m int) (float64, float64)
	xs2   func(w *byte, x0, x1 *float64, m int) (float64, float64)
	tail  func(acc float64, w []byte, x []float32, from int) float64
	dot   func(w []byte, x []float32) float32 // pure-Go twin, for cols < 16
}

var (
	fmtF32  = &asmFormat{sizeF32, false, f32Rows1, f32Rows2, f32Xs2, tailF32, genericF32}
	fmtBF16 = &asmFormat{sizeBF16, true, bf16Rows1, bf16Rows2, bf16Xs2, tailBF16, genericBF16}
	fmtF16  = &asmFormat{sizeF16, false, f16Rows1, f16Rows2, f16Xs2, tailF16, genericF16}
)
