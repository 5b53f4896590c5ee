//go:build !amd64 || purego

package dot

// Without the amd64 assembly every entry point runs the pure-Go twin.

func dotF32(w []byte, x []float32) float32  { return genericF32(w, x) }
func dotBF16(w []byte, x []float32) float32 { return genericBF16(w, x) }
func dotF16(w []byte, x []float32) float32  { return genericF16(w, x) }
func dotF32Float(w, x []float32) float32    { return genericF32Float(w, x) }

func matVecF32(dst []float32, w []byte, x []float32) {
	genericMatVec(genericF32, sizeF32, dst, w, x)
}

func matVecBF16(dst []float32, w []byte, x []float32) {
	genericMatVec(genericBF16, sizeBF16, dst, w, x)
}

func matVecF16(dst []float32, w []byte, x []float32) {
	genericMatVec(genericF16, sizeF16, dst, w, x)
}

func matMulF32(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	genericMatMul(genericF32, sizeF32, dst, stride, w, x, n, rows, cols)
}

func matMulBF16(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	genericMatMul(genericBF16, sizeBF16, dst, stride, w, x, n, rows, cols)
}

func matMulF16(dst []float32, stride int, w []byte, x []float32, n, rows, cols int) {
	genericMatMul(genericF16, sizeF16, dst, stride, w, x, n, rows, cols)
}
