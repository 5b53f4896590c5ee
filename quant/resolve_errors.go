package quant

import (
	"fmt"
	"strings"
)

// LayoutSize is one expected byte count that a resolution compared against.
type LayoutSize struct {
	Layout string // format or family name
	Bytes  int64
}

func (l LayoutSize) String() string { return fmt.Sprintf("%s %d", l.Layout, l.Bytes) }

func joinSizes(ls []LayoutSize) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.String()
	}
	return strings.Join(s, ", ")
}

// WeightSizeError reports a weight byte count that matches no layout of the
// logical shape. It matches ErrWeightSize.
type WeightSizeError struct {
	Tensor     string
	DType      string
	Got        int64
	Rows, Cols int
	Want       []LayoutSize // every layout tried
}

func (e *WeightSizeError) Error() string {
	return fmt.Sprintf("quant: tensor %q: weight is %d bytes (%s), no layout for [%d,%d] (want %s)",
		e.Tensor, e.Got, e.DType, e.Rows, e.Cols, joinSizes(e.Want))
}

// Unwrap makes errors.Is(err, ErrWeightSize) true.
func (e *WeightSizeError) Unwrap() error { return ErrWeightSize }

// ScaleSizeError reports a scale byte count that fits no format the weight
// bytes admit. It matches ErrScaleSize.
type ScaleSizeError struct {
	Tensor     string
	Family     string // the candidate format(s)
	DType      string
	Got        int64
	Rows, Cols int
	Want       []LayoutSize
	Detail     string // optional extra explanation
}

func (e *ScaleSizeError) Error() string {
	msg := fmt.Sprintf("quant: tensor %q: scale is %d bytes (%s), no %s scale layout for [%d,%d] (want %s)",
		e.Tensor, e.Got, e.DType, e.Family, e.Rows, e.Cols, joinSizes(e.Want))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrScaleSize) true.
func (e *ScaleSizeError) Unwrap() error { return ErrScaleSize }

// DTypeError reports a weight or scale dtype that the candidate formats do
// not admit. It matches ErrDType.
type DTypeError struct {
	Tensor  string
	Role    string // "weight" or "scale"
	DType   string
	Allowed []string
	Detail  string
}

func (e *DTypeError) Error() string {
	msg := fmt.Sprintf("quant: tensor %q: %s dtype %s not admitted (want one of %s)",
		e.Tensor, e.Role, e.DType, strings.Join(e.Allowed, ", "))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrDType) true.
func (e *DTypeError) Unwrap() error { return ErrDType }

// NotImplementedError reports bytes recognised as a format this build cannot
// decode (a reserved name, fp8 with UE8M0 block scales, an entropy-coded
// container). It matches ErrNotImplemented.
type NotImplementedError struct {
	Tensor string
	Format string // the recognised format name
	Reason string
}

func (e *NotImplementedError) Error() string {
	return fmt.Sprintf("quant: tensor %q: %s: %s", e.Tensor, e.Format, e.Reason)
}

// Unwrap makes errors.Is(err, ErrNotImplemented) true.
func (e *NotImplementedError) Unwrap() error { return ErrNotImplemented }

// ErrStampUnknown reports a stamp naming no registered format (§6.8).
// Inferred is what byte arithmetic found: a format name, several names joined
// by " or " when the bytes are ambiguous, or "" when inference failed too.
// It matches ErrStamp.
type ErrStampUnknown struct {
	Tensor, Stamped, Inferred string
}

func (e *ErrStampUnknown) Error() string {
	return fmt.Sprintf("quant: tensor %q: stamp names unknown format %q (bytes say %s)", e.Tensor, e.Stamped, orNone(e.Inferred))
}

// Unwrap makes errors.Is(err, ErrStamp) true.
func (e *ErrStampUnknown) Unwrap() error { return ErrStamp }

// ErrStampMismatch reports a stamp naming a known format that the bytes do
// not admit: it disagrees with an unambiguous inference or names a
// non-candidate of an ambiguous one. It matches ErrStamp.
type ErrStampMismatch struct {
	Tensor, Stamped, Inferred string
}

func (e *ErrStampMismatch) Error() string {
	return fmt.Sprintf("quant: tensor %q: stamped %s but the bytes say %s", e.Tensor, e.Stamped, orNone(e.Inferred))
}

// Unwrap makes errors.Is(err, ErrStamp) true.
func (e *ErrStampMismatch) Unwrap() error { return ErrStamp }

func orNone(s string) string {
	if s == "" {
		return "nothing resolvable"
	}
	return s
}
