package lossless12_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/k3-project/k3/internal/kernels/dot"
	"github.com/k3-project/k3/quant/lossless12"
)

// A bf16 matrix is encoded, opened and multiplied; the result is the bf16
// matrix's, bit for bit, and the encoding takes 0.71 of its bytes.
func Example() {
	const rows, cols = 4, 256
	w := make([]byte, 2*rows*cols)
	for i := range rows * cols {
		v := float32(math.Sin(float64(i))) / 16
		binary.LittleEndian.PutUint16(w[2*i:], uint16(math.Float32bits(v)>>16))
	}
	enc, err := lossless12.Encode(rows, cols, w)
	if err != nil {
		panic(err)
	}
	m, err := lossless12.Open(enc) // checks every block
	if err != nil {
		panic(err)
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	got, want := make([]float32, rows), make([]float32, rows)
	m.MatVec(got, x)
	dot.MatVecBF16(want, w, x)
	same := true
	for i := range got {
		same = same && math.Float32bits(got[i]) == math.Float32bits(want[i])
	}
	fmt.Println("same bits:", same)
	fmt.Printf("%d bytes in bf16, %d in lossless12\n", len(w), len(enc))
	// Output:
	// same bits: true
	// 2048 bytes in bf16, 1444 in lossless12
}

// Measure tells what a matrix would cost before it is encoded.
func ExampleMeasure() {
	w := make([]byte, 2*64)
	for i := range 64 {
		binary.LittleEndian.PutUint16(w[2*i:], 0x3C00+uint16(i)) // 2^−7 and up
	}
	binary.LittleEndian.PutUint16(w[2*5:], 0x0000) // +0: its exponent is far below the window
	s, err := lossless12.Measure(1, 64, w)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Escapes, s.MaxRowEscapes, s.Bytes)
	// Output: 1 1 106
}
