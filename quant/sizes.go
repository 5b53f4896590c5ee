package quant

import (
	"fmt"

	"github.com/k3-project/k3/quant/lossless12"
)

// FP8Block is the edge of the square block that shares one fp8-e4m3-b128
// scale. Changing it is a format change.
const FP8Block = 128

// GroupSizes lists the int4-grouped group sizes, finest first (the order in
// which Resolve tries them).
var groupSizes = [...]int{16, 32, 48, 64, 96, 128, 192, 256}

// GroupSizes returns the admissible int4-grouped group sizes, finest first.
func GroupSizes() []int { return append([]int(nil), groupSizes[:]...) }

// ValidGroupSize reports whether gs is an admissible int4-grouped group size.
func ValidGroupSize(gs int) bool {
	for _, g := range groupSizes {
		if g == gs {
			return true
		}
	}
	return false
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// WeightBytes returns the exact weight byte count of a [rows, cols] matrix in
// format f (gs is used by int4-grouped only and must be valid there; for
// lossless12 it is the escape bytes per row, which Resolve returns). Every
// format has its own branch; reserved formats report their registered layout
// so that byte arithmetic can recognise them. Coded formats have no fixed size
// and return an ErrNotImplemented error.
func WeightBytes(f Format, rows, cols, gs int) (int64, error) {
	if err := checkDims(rows, cols); err != nil {
		return 0, err
	}
	o, i := int64(rows), int64(cols)
	switch f {
	case F32:
		return 4 * o * i, nil
	case BF16:
		return 2 * o * i, nil
	case F16:
		return 2 * o * i, nil
	case Lossless12:
		if gs < 0 || gs > cols {
			return 0, fmt.Errorf("%w: lossless12 [%d, %d] with %d escape bytes per row, want 0 to %d", ErrShape, rows, cols, gs, cols)
		}
		if rows >= lossless12.MaxDim || cols >= lossless12.MaxDim {
			return 0, fmt.Errorf("%w: lossless12 [%d, %d] outside [0, 2^31)", ErrShape, rows, cols)
		}
		return lossless12.Header{Rows: rows, Cols: cols, Escapes: gs}.Size(), nil
	case Int8Row:
		return o * i, nil
	case Int4Row:
		return o * ceilDiv(i, 2), nil
	case Int4Grouped:
		if !ValidGroupSize(gs) {
			return 0, fmt.Errorf("%w: int4-grouped gs = %d, want one of %v", ErrGroupSize, gs, groupSizes)
		}
		return o * ceilDiv(i, 2), nil
	case Int2Row:
		return o * ceilDiv(i, 4), nil
	case Int3G64:
		return 24 * o * ceilDiv(i, 64), nil
	case E8IQ3Lattice:
		return 98 * o * ceilDiv(i, 256), nil
	case MXFP4:
		if cols%32 != 0 {
			return 0, fmt.Errorf("%w: mxfp4 needs cols %% 32 == 0, got cols = %d", ErrShape, cols)
		}
		return o * i / 2, nil
	case FP8E4M3B128:
		return o * i, nil
	case MXFP4CFS1, Int4RowCFS1, Int4GroupedCFS1, Int4Rans256G0, MXFP4ScaleCFS1:
		return 0, fmt.Errorf("%w: %s is entropy-coded; its size is that of its record", ErrNotImplemented, f)
	}
	return 0, fmt.Errorf("%w: ordinal %d", ErrUnknownFormat, uint8(f))
}

// ScaleBytes returns the exact scale byte count of a [rows, cols] matrix in
// format f (0 for formats without scales). Every format has its own branch.
func ScaleBytes(f Format, rows, cols, gs int) (int64, error) {
	if err := checkDims(rows, cols); err != nil {
		return 0, err
	}
	o, i := int64(rows), int64(cols)
	switch f {
	case F32:
		return 0, nil
	case BF16:
		return 0, nil
	case F16:
		return 0, nil
	case Lossless12:
		return 0, nil
	case Int8Row:
		return 4 * o, nil
	case Int4Row:
		return 4 * o, nil
	case Int4Grouped:
		if !ValidGroupSize(gs) {
			return 0, fmt.Errorf("%w: int4-grouped gs = %d, want one of %v", ErrGroupSize, gs, groupSizes)
		}
		return 4 * o * ceilDiv(i, int64(gs)), nil
	case Int2Row:
		return 4 * o, nil
	case Int3G64:
		return 4 * o * ceilDiv(i, 64), nil
	case E8IQ3Lattice:
		return 4, nil
	case MXFP4:
		if cols%32 != 0 {
			return 0, fmt.Errorf("%w: mxfp4 needs cols %% 32 == 0, got cols = %d", ErrShape, cols)
		}
		return o * i / 32, nil
	case FP8E4M3B128:
		return 4 * ceilDiv(o, FP8Block) * ceilDiv(i, FP8Block), nil
	case MXFP4CFS1, Int4RowCFS1, Int4GroupedCFS1, Int4Rans256G0, MXFP4ScaleCFS1:
		return 0, fmt.Errorf("%w: %s is entropy-coded; its size is that of its record", ErrNotImplemented, f)
	}
	return 0, fmt.Errorf("%w: ordinal %d", ErrUnknownFormat, uint8(f))
}
