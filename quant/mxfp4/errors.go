package mxfp4

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error returned by this package matches exactly one
// of them with errors.Is and carries the observed and expected numbers.
var (
	// ErrShape reports negative or overflowing dimensions, tensors that are
	// not 2-D, mismatched row counts, or buffers (dst, x) of the wrong length.
	ErrShape = errors.New("mxfp4: invalid shape")
	// ErrWidth reports a logical width that is not a multiple of GroupSize.
	ErrWidth = errors.New("mxfp4: logical width is not a multiple of 32")
	// ErrPackedSize reports a packed array whose size does not match the shape.
	ErrPackedSize = errors.New("mxfp4: packed byte count does not match the shape")
	// ErrScaleSize reports a scale array whose size does not match the shape.
	ErrScaleSize = errors.New("mxfp4: scale byte count does not match the shape")
	// ErrGroupSize reports scale columns that imply a group size other than
	// 32; the error is a *GroupSizeError.
	ErrGroupSize = errors.New("mxfp4: scales imply a group size other than 32")
	// ErrNonFinite reports a NaN or infinite weight given to Quantize.
	ErrNonFinite = errors.New("mxfp4: non-finite weight")
	// ErrScaleRange reports a block exponent outside E8M0's [−127, 127].
	ErrScaleRange = errors.New("mxfp4: block exponent outside the E8M0 range")
	// ErrAllZero reports a matrix whose every code would be ±0; a writer must
	// not emit it (a fixture made of zeros cannot fail).
	ErrAllZero = errors.New("mxfp4: every code is ±0")
)

// GroupSizeError reports packed and scale widths whose ratio is not 32
// elements per scale. It matches ErrGroupSize.
type GroupSizeError struct {
	PackedCols int // bytes per row of the packed array (2 elements each)
	ScaleCols  int // scale bytes per row
}

// ImpliedGroupSize returns the number of elements per scale byte that the
// widths imply (2·PackedCols/ScaleCols; 0 when ScaleCols is 0).
func (e *GroupSizeError) ImpliedGroupSize() float64 {
	if e.ScaleCols == 0 {
		return 0
	}
	return float64(2*e.PackedCols) / float64(e.ScaleCols)
}

func (e *GroupSizeError) Error() string {
	return fmt.Sprintf("%v: %d packed columns (%d elements) with %d scale columns imply a group size of %g, want %d",
		ErrGroupSize, e.PackedCols, 2*e.PackedCols, e.ScaleCols, e.ImpliedGroupSize(), GroupSize)
}

// Unwrap makes errors.Is(err, ErrGroupSize) true.
func (e *GroupSizeError) Unwrap() error { return ErrGroupSize }
