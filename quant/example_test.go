package quant_test

import (
	"fmt"
	"slices"

	"github.com/k3-project/k3/quant"
)

// A tensor's format is decided from its logical shape (from the model
// configuration), the dtypes and byte counts of its weight and scale
// tensors, and its stamp; the matrix then multiplies straight from the bytes.
func Example() {
	const rows, cols = 2, 64
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(i%7) - 3
	}
	packed, scales, err := quant.Quantize(quant.MXFP4, w, rows, cols, 0)
	if err != nil {
		fmt.Println(err)
		return
	}

	// What a checkpoint reader knows about the two tensors.
	weight := quant.TensorDesc{DType: "U8", NBytes: int64(len(packed))}
	scale := &quant.TensorDesc{DType: "F8_E8M0", NBytes: int64(len(scales))}
	f, gs, err := quant.Resolve("layers.3.experts.7.w1", rows, cols, weight, scale, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := quant.New(f, rows, cols, gs, packed, scales)
	if err != nil {
		fmt.Println(err)
		return
	}
	x := slices.Repeat([]float32{1}, cols)
	y := make([]float32, rows)
	m.MatVec(y, x)
	fmt.Println(f, y)

	// A per-row int8 tensor whose scale bytes also fit fp8 blocks (one row,
	// I ≤ 128) is int8-row unless a stamp says otherwise.
	f, _, err = quant.Resolve("head", 1, 64, quant.TensorDesc{DType: "U8", NBytes: 64},
		&quant.TensorDesc{DType: "F32", NBytes: 4}, "fp8-e4m3-b128")
	fmt.Println(f, err)
	// Output:
	// mxfp4 [-3 -2]
	// fp8-e4m3-b128 <nil>
}
