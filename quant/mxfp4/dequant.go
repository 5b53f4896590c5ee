package mxfp4

import "fmt"

// Dequantize writes the float32 value of every element of the logical
// [rows, cols] matrix into dst (len rows·cols, row-major): E2M1(code)·2^(s−127)
// rounded once to float32, +0 in groups whose scale byte is 255. It is meant
// for tests, tools and small matrices; the kernels never need it.
func Dequantize(dst []float32, packed, scales []byte, rows, cols int) error {
	_, err := DequantizeStats(dst, packed, scales, rows, cols)
	return err
}

// DequantizeStats is Dequantize that also reports the groups it decoded.
func DequantizeStats(dst []float32, packed, scales []byte, rows, cols int) (Stats, error) {
	if err := Check(rows, cols, len(packed), len(scales)); err != nil {
		return Stats{}, fmt.Errorf("dequantize: %w", err)
	}
	if len(dst) != rows*cols {
		return Stats{}, fmt.Errorf("dequantize: %w: dst has %d elements, want %d", ErrShape, len(dst), rows*cols)
	}
	var st Stats
	for g, s := range scales {
		dequantGroup(dst[g*GroupSize:(g+1)*GroupSize], packed[g*(GroupSize/2):(g+1)*(GroupSize/2)], s)
		st.Groups++
		if s == NaNScale {
			st.NaNScaleGroups++
		}
	}
	return st, nil
}

// DequantizeRow decodes one row: packed holds cols/2 bytes, scales cols/32
// bytes, dst cols elements. Decoding rows into scratch keeps memory bounded
// where a tool needs float values.
func DequantizeRow(dst []float32, packed, scales []byte) (Stats, error) {
	return DequantizeStats(dst, packed, scales, 1, len(dst))
}

// dequantGroup decodes 32 elements from 16 bytes sharing scale byte s.
func dequantGroup(dst []float32, packed []byte, s byte) {
	dst = dst[:GroupSize]
	packed = packed[:GroupSize/2]
	if s == NaNScale {
		clear(dst)
		return
	}
	sc := scale64(s)
	for i, b := range packed {
		// One rounding of an exact float64 product: identical to the float32
		// product E2M1·2^(s−127) and never a double rounding.
		dst[2*i] = float32(e2m1f64[b&15] * sc)
		dst[2*i+1] = float32(e2m1f64[b>>4] * sc)
	}
}
