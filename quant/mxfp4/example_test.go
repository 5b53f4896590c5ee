package mxfp4_test

import (
	"fmt"
	"slices"

	"github.com/k3-project/k3/quant/mxfp4"
)

// Quantize a 2×32 matrix, multiply it by a vector straight from the packed
// nibbles, and decode it back to floats.
func Example() {
	const rows, cols = 2, 32
	w := make([]float32, rows*cols)
	for c := range cols {
		w[c] = float32(c%8) - 3.5     // row 0: −3.5 … 3.5
		w[cols+c] = 0.01 * float32(c) // row 1: 0 … 0.31
	}
	packed, scales, err := mxfp4.Quantize(w, rows, cols)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("bytes:", len(packed), "packed +", len(scales), "scales; scale bytes", scales)

	x := slices.Repeat([]float32{1}, cols)
	y := make([]float32, rows)
	mxfp4.MatVec(y, packed, scales, x)
	fmt.Println("W·1 =", y)

	back := make([]float32, rows*cols)
	if err := mxfp4.Dequantize(back, packed, scales, rows, cols); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("row 0 starts", back[:8])
	fmt.Println("row 1 ends  ", back[cols+24:])
	// Row 0: amax 3.5 gives e = ⌊log2 3.5⌋ − 2 = −1 (byte 126); 3.5/0.5 = 7
	// saturates to 6, and 2.5/0.5 = 5 is a tie between 4 and 6 that goes to 4.
	// Row 1: amax 0.31 gives e = −4 (byte 123); everything from 0.16 up
	// rounds to 4·2^−4. Four bits per weight are coarse.

	// Output:
	// bytes: 32 packed + 2 scales; scale bytes [126 123]
	// W·1 = [0 4.8125]
	// row 0 starts [-3 -2 -1.5 -0.5 0.5 1.5 2 3]
	// row 1 ends   [0.25 0.25 0.25 0.25 0.25 0.25 0.25 0.25]
}
