package mxfp4

import (
	"fmt"
	"math"
)

// Check validates flat buffers for a logical [rows, cols] matrix: rows and
// cols non-negative, cols a multiple of 32, len(packed) = rows·cols/2 and
// len(scales) = rows·cols/32. When the scale count is a whole number of bytes
// per row but not cols/32, the error is a *GroupSizeError naming the implied
// group size.
func Check(rows, cols, packedLen, scalesLen int) error {
	if rows < 0 || cols < 0 {
		return fmt.Errorf("%w: [%d, %d] has a negative dimension", ErrShape, rows, cols)
	}
	if cols%GroupSize != 0 {
		return fmt.Errorf("%w: cols = %d (remainder %d)", ErrWidth, cols, cols%GroupSize)
	}
	if cols > 0 && rows > math.MaxInt/cols {
		return fmt.Errorf("%w: [%d, %d] overflows int", ErrShape, rows, cols)
	}
	if want := rows * (cols / 2); packedLen != want {
		return fmt.Errorf("%w: [%d, %d] needs %d packed bytes, got %d", ErrPackedSize, rows, cols, want, packedLen)
	}
	if want := rows * (cols / GroupSize); scalesLen != want {
		if rows > 0 && scalesLen > 0 && scalesLen%rows == 0 {
			return fmt.Errorf("[%d, %d] with %d scale bytes: %w", rows, cols, scalesLen,
				&GroupSizeError{PackedCols: cols / 2, ScaleCols: scalesLen / rows})
		}
		return fmt.Errorf("%w: [%d, %d] needs %d scale bytes, got %d", ErrScaleSize, rows, cols, want, scalesLen)
	}
	return nil
}

// CheckShapes validates the 2-D tensor shapes of a packed array and its scale
// array against the logical [rows, cols] (which come from the model
// configuration, never from the file), in the order of §6.2: both
// tensors 2-D with rows rows; scaleCols·32 = packedCols·2 (else a
// *GroupSizeError); 2·packedCols = cols; cols a multiple of 32.
func CheckShapes(rows, cols int, packedShape, scaleShape []int) error {
	if len(packedShape) != 2 || len(scaleShape) != 2 {
		return fmt.Errorf("%w: packed shape %v and scale shape %v must both be 2-D", ErrShape, packedShape, scaleShape)
	}
	pr, pc, sr, sc := packedShape[0], packedShape[1], scaleShape[0], scaleShape[1]
	if pr < 0 || pc < 0 || sr < 0 || sc < 0 || rows < 0 || cols < 0 {
		return fmt.Errorf("%w: negative dimension in packed %v, scales %v or [%d, %d]", ErrShape, packedShape, scaleShape, rows, cols)
	}
	if pr != sr || pr != rows {
		return fmt.Errorf("%w: packed has %d rows, scales %d, want %d", ErrShape, pr, sr, rows)
	}
	if pc > math.MaxInt/2 || sc > math.MaxInt/GroupSize {
		return fmt.Errorf("%w: packed %v or scales %v overflow int", ErrShape, packedShape, scaleShape)
	}
	if sc*GroupSize != pc*2 {
		return &GroupSizeError{PackedCols: pc, ScaleCols: sc}
	}
	if 2*pc != cols {
		return fmt.Errorf("%w: %d packed columns hold %d elements, want cols = %d", ErrPackedSize, pc, 2*pc, cols)
	}
	if cols%GroupSize != 0 {
		return fmt.Errorf("%w: cols = %d (remainder %d)", ErrWidth, cols, cols%GroupSize)
	}
	return nil
}

// RowRange returns the packed and scale bytes of rows [lo, hi) of a matrix
// with cols columns, sharing storage, so row ranges can be multiplied on
// separate goroutines. It requires 0 <= lo <= hi <= rows and valid geometry
// (see Check); otherwise it returns an ErrShape error.
func RowRange(packed, scales []byte, cols, lo, hi int) (p, s []byte, err error) {
	if cols < 0 || cols%GroupSize != 0 {
		return nil, nil, fmt.Errorf("%w: cols = %d", ErrWidth, cols)
	}
	pb, sb := cols/2, cols/GroupSize
	if lo < 0 || hi < lo || (pb > 0 && hi > len(packed)/pb) || (sb > 0 && hi > len(scales)/sb) {
		return nil, nil, fmt.Errorf("%w: rows [%d, %d) outside a matrix of %d packed and %d scale bytes with %d columns",
			ErrShape, lo, hi, len(packed), len(scales), cols)
	}
	return packed[lo*pb : hi*pb : hi*pb], scales[lo*sb : hi*sb : hi*sb], nil
}
