package dot_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/k3-project/k3/internal/kernels/dot"
)

// A 2×3 bf16 matrix, as its raw little-endian bytes would appear in a
// safetensors file, applied to a vector.
func ExampleMatVecBF16() {
	rows := [][]float32{{1, 2, 3}, {0.5, -1, 4}}
	var w []byte
	for _, row := range rows {
		for _, v := range row {
			// These values are exact in bf16: the top half of the f32 bits.
			w = binary.LittleEndian.AppendUint16(w, uint16(math.Float32bits(v)>>16))
		}
	}
	x := []float32{1, 1, 0.25}
	dst := make([]float32, len(rows))
	dot.MatVecBF16(dst, w, x)
	fmt.Println(dst)
	// Output: [3.75 0.5]
}

// Batched application to two activation rows: row t of the output starts at
// t*stride, and each element equals the corresponding MatVec result.
func ExampleMatMulF32() {
	var w []byte
	for _, v := range []float32{1, 2, 3, 4} { // 2×2, rows {1,2} and {3,4}
		w = binary.LittleEndian.AppendUint32(w, math.Float32bits(v))
	}
	x := []float32{1, 0, 0, 1} // two activation rows: (1,0) and (0,1)
	dst := make([]float32, 4)
	dot.MatMulF32(dst, 2, w, x, 2)
	fmt.Println(dst)
	// Output: [1 3 2 4]
}
