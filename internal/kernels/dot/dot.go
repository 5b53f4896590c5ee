package dot

import "fmt"

// The kernels take no error return: they sit in the innermost loop and their
// callers (quant.New*, the engine) validate shapes once when a matrix is
// built. A length mismatch here is therefore a programming error inside the
// module, and the functions panic with a message naming the mismatch rather
// than read out of bounds or silently truncate.

// Element sizes in bytes of the weight encodings.
const (
	sizeF32  = 4
	sizeBF16 = 2
	sizeF16  = 2
)

// F32 returns the R16 dot product of little-endian float32 weights w with x.
// len(w) must be 4*len(x).
func F32(w []byte, x []float32) float32 {
	checkDot("F32", len(w), sizeF32, len(x))
	return dotF32(w, x)
}

// BF16 returns the R16 dot product of little-endian bfloat16 weights w with
// x. len(w) must be 2*len(x).
func BF16(w []byte, x []float32) float32 {
	checkDot("BF16", len(w), sizeBF16, len(x))
	return dotBF16(w, x)
}

// F16 returns the R16 dot product of little-endian IEEE binary16 weights w
// with x. len(w) must be 2*len(x).
func F16(w []byte, x []float32) float32 {
	checkDot("F16", len(w), sizeF16, len(x))
	return dotF16(w, x)
}

// F32Float returns the R16 dot product of w and x; len(w) must equal len(x).
func F32Float(w, x []float32) float32 {
	if len(w) != len(x) {
		panic(fmt.Sprintf("dot.F32Float: len(w)=%d != len(x)=%d", len(w), len(x)))
	}
	return dotF32Float(w, x)
}

// MatVecF32 sets dst[r] to the R16 dot product of row r of the row-major
// little-endian float32 matrix w with x; rows = len(dst), cols = len(x).
func MatVecF32(dst []float32, w []byte, x []float32) {
	checkMatVec("MatVecF32", dst, len(w), sizeF32, len(x))
	matVecF32(dst, w, x)
}

// MatVecBF16 is MatVecF32 for bfloat16 weights.
func MatVecBF16(dst []float32, w []byte, x []float32) {
	checkMatVec("MatVecBF16", dst, len(w), sizeBF16, len(x))
	matVecBF16(dst, w, x)
}

// MatVecF16 is MatVecF32 for IEEE binary16 weights.
func MatVecF16(dst []float32, w []byte, x []float32) {
	checkMatVec("MatVecF16", dst, len(w), sizeF16, len(x))
	matVecF16(dst, w, x)
}

// MatMulF32 applies the row-major little-endian float32 matrix w to n
// activation rows packed in x (cols = len(x)/n, rows = len(w)/(4·cols)):
// dst[t*stride + r] = row r · x[t*cols:(t+1)*cols]. Every element is
// bit-identical to what MatVecF32 returns for that activation row; each
// weight row is read from memory once for all n activation rows. stride must
// be at least rows; dst elements between rows and stride are not written.
// cols must be positive when n > 0, since rows cannot be inferred otherwise.
func MatMulF32(dst []float32, stride int, w []byte, x []float32, n int) {
	rows, cols := checkMatMul("MatMulF32", dst, stride, len(w), sizeF32, len(x), n)
	if rows > 0 && n > 0 {
		matMulF32(dst, stride, w, x, n, rows, cols)
	}
}

// MatMulBF16 is MatMulF32 for bfloat16 weights.
func MatMulBF16(dst []float32, stride int, w []byte, x []float32, n int) {
	rows, cols := checkMatMul("MatMulBF16", dst, stride, len(w), sizeBF16, len(x), n)
	if rows > 0 && n > 0 {
		matMulBF16(dst, stride, w, x, n, rows, cols)
	}
}

// MatMulF16 is MatMulF32 for IEEE binary16 weights.
func MatMulF16(dst []float32, stride int, w []byte, x []float32, n int) {
	rows, cols := checkMatMul("MatMulF16", dst, stride, len(w), sizeF16, len(x), n)
	if rows > 0 && n > 0 {
		matMulF16(dst, stride, w, x, n, rows, cols)
	}
}

func checkDot(name string, wlen, size, xlen int) {
	if wlen != size*xlen {
		panic(fmt.Sprintf("dot.%s: len(w)=%d bytes, want %d·len(x)=%d", name, wlen, size, size*xlen))
	}
}

func checkMatVec(name string, dst []float32, wlen, size, cols int) {
	if want := len(dst) * cols * size; wlen != want {
		panic(fmt.Sprintf("dot.%s: len(w)=%d bytes, want rows·cols·%d = %d·%d·%d = %d",
			name, wlen, size, len(dst), cols, size, want))
	}
}

// checkMatMul validates a batched call and returns the matrix shape.
func checkMatMul(name string, dst []float32, stride, wlen, size, xlen, n int) (rows, cols int) {
	switch {
	case n < 0:
		panic(fmt.Sprintf("dot.%s: negative n=%d", name, n))
	case n == 0:
		if xlen != 0 {
			panic(fmt.Sprintf("dot.%s: n=0 but len(x)=%d", name, xlen))
		}
		return 0, 0
	case xlen%n != 0:
		panic(fmt.Sprintf("dot.%s: len(x)=%d is not a multiple of n=%d", name, xlen, n))
	}
	cols = xlen / n
	if cols == 0 {
		panic(fmt.Sprintf("dot.%s: zero columns (len(x)=0), rows cannot be derived from len(w)=%d", name, wlen))
	}
	rb := cols * size
	if wlen%rb != 0 {
		panic(fmt.Sprintf("dot.%s: len(w)=%d bytes is not a multiple of the row size %d (cols=%d)", name, wlen, rb, cols))
	}
	rows = wlen / rb
	if stride < rows {
		panic(fmt.Sprintf("dot.%s: stride=%d < rows=%d", name, stride, rows))
	}
	if rows > 0 {
		if need := (n-1)*stride + rows; len(dst) < need {
			panic(fmt.Sprintf("dot.%s: len(dst)=%d < (n-1)·stride+rows = %d", name, len(dst), need))
		}
	}
	return rows, cols
}
