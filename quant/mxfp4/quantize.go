package mxfp4

import (
	"fmt"
	"math"
)

// minAmax is the floor the oracle applies to a block maximum before log2.
const minAmax = 1e-30

// Quantize encodes a row-major [rows, cols] float32 matrix with the oracle's
// rule (§6.2) and returns freshly allocated packed (rows·cols/2) and
// scale (rows·cols/32) arrays. Per 32-element block: amax = max|w|,
// e = ⌊log2(max(amax, 1e−30))⌋ − 2 (computed exactly from the float bits),
// scale byte e+127; each element becomes the nearest E2M1 magnitude of
// |w|/2^e, ties to the smaller code, with the sign bit set when w < 0 and the
// magnitude is nonzero (code 8, −0, is never written). It refuses non-finite
// weights (ErrNonFinite), exponents outside [−127, 127] (ErrScaleRange, which
// finite float32 input cannot reach: e stays within [−102, 125]) and a matrix
// whose codes are all ±0 (ErrAllZero), including an empty one.
func Quantize(w []float32, rows, cols int) (packed, scales []byte, err error) {
	if err := Check(rows, cols, rows*(cols/2), rows*(cols/GroupSize)); err != nil {
		return nil, nil, fmt.Errorf("quantize: %w", err)
	}
	if len(w) != rows*cols {
		return nil, nil, fmt.Errorf("quantize: %w: %d weights for [%d, %d]", ErrShape, len(w), rows, cols)
	}
	packed = make([]byte, rows*cols/2)
	scales = make([]byte, rows*cols/GroupSize)
	nonzero := false
	for g := range scales {
		blk := w[g*GroupSize : (g+1)*GroupSize]
		e, err := blockExponent(blk)
		if err != nil {
			r, c := g*GroupSize/max(cols, 1), g*GroupSize%max(cols, 1)
			return nil, nil, fmt.Errorf("quantize: block at row %d, column %d: %w", r, c, err)
		}
		scales[g] = byte(e + 127)
		out := packed[g*(GroupSize/2) : (g+1)*(GroupSize/2)]
		for i := range out {
			lo, hi := encode(blk[2*i], e), encode(blk[2*i+1], e)
			out[i] = lo | hi<<4
			nonzero = nonzero || lo&7 != 0 || hi&7 != 0
		}
	}
	if !nonzero {
		return nil, nil, fmt.Errorf("quantize: %w ([%d, %d])", ErrAllZero, rows, cols)
	}
	return packed, scales, nil
}

// blockExponent returns e = ⌊log2(max(amax, 1e−30))⌋ − 2 for one block.
func blockExponent(blk []float32) (int, error) {
	amax := 0.0
	for j, v := range blk {
		a := math.Abs(float64(v))
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return 0, fmt.Errorf("%w: %v at block offset %d", ErrNonFinite, v, j)
		}
		amax = max(amax, a)
	}
	// Frexp is exact: v = f·2^k with f in [0.5, 1), so ⌊log2 v⌋ = k−1
	// (math.Log2 could round a value just below a power of two up to it).
	_, k := math.Frexp(max(amax, minAmax))
	e := k - 1 - 2
	if e < -127 || e > 127 {
		return 0, fmt.Errorf("%w: e = %d for block maximum %g", ErrScaleRange, e, amax)
	}
	return e, nil
}

// encode returns the code of v in a block with exponent e.
func encode(v float32, e int) byte {
	// |v|·2^−e is exact in float64 for every finite float32 and e in range.
	a := math.Ldexp(math.Abs(float64(v)), -e)
	m := magnitude(a)
	if v < 0 && m != 0 {
		m |= 8
	}
	return m
}

// magnitude returns the code of the E2M1 magnitude nearest to a >= 0, ties to
// the smaller code; a at or above 6 saturates to 6 (code 7).
func magnitude(a float64) byte {
	// Midpoints between consecutive magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6.
	switch {
	case a <= 0.25:
		return 0
	case a <= 0.75:
		return 1
	case a <= 1.25:
		return 2
	case a <= 1.75:
		return 3
	case a <= 2.5:
		return 4
	case a <= 3.5:
		return 5
	case a <= 5:
		return 6
	default:
		return 7
	}
}
