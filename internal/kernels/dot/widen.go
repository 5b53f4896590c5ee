package dot

import (
	"encoding/binary"
	"math"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// f32At, bf16At and f16At read element i of a little-endian weight row.
func f32At(w []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
}

func bf16At(w []byte, i int) float32 {
	return floatbits.BF16(binary.LittleEndian.Uint16(w[2*i:]))
}

func f16At(w []byte, i int) float32 {
	return floatbits.F16(binary.LittleEndian.Uint16(w[2*i:]))
}
