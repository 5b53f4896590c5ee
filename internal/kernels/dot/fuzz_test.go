package dot

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzDot feeds arbitrary bytes as weights and activations (any bit
// patterns, NaN and Inf included) to every format and checks the exported
// kernels (assembly where available), the pure-Go twin and the independent
// reference against each other, as single dots and as mat-vec/mat-mul rows.
func FuzzDot(f *testing.F) {
	f.Add([]byte{}, uint8(1))
	f.Add(make([]byte, 200), uint8(3))
	seed := make([]byte, 517)
	for i := range seed {
		seed[i] = byte(i*131 + 7)
	}
	f.Add(seed, uint8(2))
	f.Add([]byte{0x80, 0x7f, 0x00, 0x7c, 0x01, 0x00, 0xff, 0xff}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, rowsB uint8) {
		rows := 1 + int(rowsB%4)
		// Split data: activations get 4 bytes per element, each format's
		// weights reuse the same bytes.
		cols := len(data) / (4 + 4*rows)
		if cols == 0 {
			return
		}
		x := make([]float32, cols)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		wsrc := data[4*cols:]
		for _, fm := range formats {
			w := wsrc[:rows*cols*fm.size]
			dst := make([]float32, rows)
			fm.matVec(dst, w, x)
			mm := make([]float32, rows)
			fm.matMul(mm, rows, w, x, 1)
			for r := range rows {
				wr := w[r*cols*fm.size : (r+1)*cols*fm.size]
				want := refRow(fm, wr, x)
				for name, got := range map[string]float32{
					"dot": fm.dot(wr, x), "generic": fm.gen(wr, x), "MatVec": dst[r], "MatMul": mm[r],
				} {
					if !sameBits(got, want) {
						t.Fatalf("%s %s rows=%d cols=%d row %d: %g (%#08x), reference %g (%#08x)",
							fm.name, name, rows, cols, r, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	})
}
