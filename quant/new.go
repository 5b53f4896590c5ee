package quant

import "fmt"

// New wraps packed weight and scale bytes of a logical [rows, cols] matrix in
// format f (typically the result of Resolve). gs is the int4-grouped group
// size, for lossless12 the escape bytes per row (as Resolve returns them),
// and is ignored by the other formats; scale must be nil or empty for
// f32, bf16, f16 and lossless12. Formats this build does not implement are refused with
// an error matching ErrNotImplemented.
func New(f Format, rows, cols, gs int, weight, scale []byte) (Matrix, error) {
	switch f {
	case F32, BF16, F16:
		if len(scale) != 0 {
			return nil, fmt.Errorf("%w: %s takes no scales, got %d bytes", ErrScaleSize, f, len(scale))
		}
		return newPlain(f, rows, cols, weight)
	case Lossless12:
		if len(scale) != 0 {
			return nil, fmt.Errorf("%w: %s takes no scales, got %d bytes", ErrScaleSize, f, len(scale))
		}
		want, err := WeightBytes(f, rows, cols, gs)
		if err != nil {
			return nil, err
		}
		if err := checkLen("weight", f, rows, cols, len(weight), want, ErrWeightSize); err != nil {
			return nil, err
		}
		return NewLossless12(rows, cols, weight)
	case Int8Row:
		return NewInt8Row(rows, cols, weight, scale)
	case Int4Row:
		return NewInt4Row(rows, cols, weight, scale)
	case Int4Grouped:
		return NewInt4Grouped(rows, cols, gs, weight, scale)
	case FP8E4M3B128:
		return NewFP8E4M3B128(rows, cols, weight, scale)
	case MXFP4:
		return NewMXFP4(rows, cols, weight, scale)
	}
	if f.Coded() {
		return nil, fmt.Errorf("%w: %s is a container: decode it with ResolveCoded and build the base format", ErrCoded, f)
	}
	if f.Known() {
		return nil, fmt.Errorf("%w: %s (%s)", ErrNotImplemented, f, f.Status())
	}
	return nil, fmt.Errorf("%w: ordinal %d", ErrUnknownFormat, uint8(f))
}
