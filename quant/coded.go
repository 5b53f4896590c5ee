package quant

import (
	"errors"
	"fmt"

	"github.com/k3-project/k3/quant/cfs1"
)

// ErrCoded reports an entropy-coded tensor met where only byte counts are
// known (Resolve, New), or a coded tensor whose stamp or record does not fit
// the CFS1 path. A *CodedError matches it.
var ErrCoded = errors.New("quant: entropy-coded tensor")

// CodedError reports a tensor stamped with a CFS1 container format where the
// record bytes are not available: Resolve sees only byte counts, so the
// caller must decode the record with ResolveCoded (weights) or
// DecodeScaleRecord (mxfp4 scales) first. It matches ErrCoded.
type CodedError struct {
	Tensor string
	Format string
}

func (e *CodedError) Error() string {
	hint := "ResolveCoded"
	if e.Format == MXFP4ScaleCFS1.String() {
		hint = "DecodeScaleRecord"
	}
	return fmt.Sprintf("quant: tensor %q is stamped %s, a CFS1 record: decode it with %s (byte counts alone cannot resolve it)",
		e.Tensor, e.Format, hint)
}

// Unwrap makes errors.Is(err, ErrCoded) true.
func (e *CodedError) Unwrap() error { return ErrCoded }

// codedWeightBase returns the base format of a CFS1 weight container.
func codedWeightBase(f Format) (Format, bool) {
	switch f {
	case MXFP4CFS1:
		return MXFP4, true
	case Int4RowCFS1:
		return Int4Row, true
	case Int4GroupedCFS1:
		return Int4Grouped, true
	}
	return 0, false
}

// ResolveCoded is §6.7 step 1 for a weight tensor stamped with a CFS1
// container format (mxfp4-cfs1, int4-row-cfs1, int4-grouped-cfs1): the
// tensor is dtype U8 holding one CFS1 record. The decoded length must equal
// the base format's weight bytes for [O, I] (checked from the header before
// any allocation); the record is decoded into a new buffer, and steps 2–7 and
// the stamp verification of Resolve then run on the decoded byte count with
// the base format as the stamp. It returns the base format, the int4-grouped
// group size, and the decoded weight bytes, ready for New. Decoding errors
// match cfs1.ErrCorrupt.
func ResolveCoded(name string, O, I int, weightDType string, record []byte, scale *TensorDesc, stamp string) (Format, int, []byte, error) {
	sf, err := ParseFormat(stamp)
	if err != nil {
		return 0, 0, nil, &ErrStampUnknown{Tensor: name, Stamped: stamp, Inferred: "a CFS1 record"}
	}
	base, ok := codedWeightBase(sf)
	if !ok {
		if sf == Int4Rans256G0 {
			return 0, 0, nil, &NotImplementedError{Tensor: name, Format: stamp,
				Reason: "the optional int4-rans256-g0 decoder is not in this build"}
		}
		return 0, 0, nil, fmt.Errorf("%w: tensor %q: ResolveCoded needs a CFS1 weight stamp (mxfp4-cfs1, int4-row-cfs1, int4-grouped-cfs1), got %q",
			ErrCoded, name, stamp)
	}
	if weightDType != "U8" {
		return 0, 0, nil, &DTypeError{Tensor: name, Role: "weight", DType: weightDType, Allowed: []string{"U8"},
			Detail: "a CFS1 record is stored as U8"}
	}
	_, n, err := cfs1.Header(record)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("quant: tensor %q (%s): %w", name, stamp, err)
	}
	gsProbe := 0
	if base == Int4Grouped {
		gsProbe = groupSizes[0] // the weight bytes do not depend on gs
	}
	want, err := WeightBytes(base, O, I, gsProbe)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("quant: tensor %q (%s): %w", name, stamp, err)
	}
	if int64(n) != want {
		return 0, 0, nil, &WeightSizeError{Tensor: name, DType: "U8 (decoded " + stamp + ")", Got: int64(n), Rows: O, Cols: I,
			Want: []LayoutSize{{base.String(), want}}}
	}
	buf := make([]byte, n)
	if _, err := cfs1.DecodeInto(buf, record); err != nil {
		return 0, 0, nil, fmt.Errorf("quant: tensor %q (%s): %w", name, stamp, err)
	}
	f, gs, err := Resolve(name, O, I, TensorDesc{DType: "U8", NBytes: int64(n)}, scale, base.String())
	if err != nil {
		return 0, 0, nil, err
	}
	return f, gs, buf, nil
}

// DecodeScaleRecord decodes the scale tensor of an [O, I] mxfp4 matrix
// stamped mxfp4-scale-cfs1: a U8 CFS1 record (mode 2, or mode 0 when coding
// did not pay) whose decoded length must be O·I/32. The decoded bytes then
// resolve like a raw U8 scale tensor.
func DecodeScaleRecord(name string, O, I int, record []byte, stamp string) ([]byte, error) {
	if stamp != MXFP4ScaleCFS1.String() {
		return nil, fmt.Errorf("%w: scale tensor %q: DecodeScaleRecord needs the stamp %s, got %q", ErrCoded, name, MXFP4ScaleCFS1, stamp)
	}
	mode, n, err := cfs1.Header(record)
	if err != nil {
		return nil, fmt.Errorf("quant: scale tensor %q (%s): %w", name, stamp, err)
	}
	if mode == cfs1.ModeNibble {
		return nil, fmt.Errorf("%w: scale tensor %q: %s must be a byte (mode 2) or raw record, got mode 1", ErrCoded, name, stamp)
	}
	want, err := ScaleBytes(MXFP4, O, I, 0)
	if err != nil {
		return nil, fmt.Errorf("quant: scale tensor %q: %w", name, err)
	}
	if int64(n) != want {
		return nil, &ScaleSizeError{Tensor: name, Family: MXFP4.String(), DType: "U8 (decoded " + stamp + ")", Got: int64(n),
			Rows: O, Cols: I, Want: []LayoutSize{{"mxfp4 (O·I/32)", want}}}
	}
	buf := make([]byte, n)
	if _, err := cfs1.DecodeInto(buf, record); err != nil {
		return nil, fmt.Errorf("quant: scale tensor %q (%s): %w", name, stamp, err)
	}
	return buf, nil
}

// EncodeCoded codes the weight bytes of a 4-bit format (mxfp4, int4-row,
// int4-grouped) as a CFS1 nibble record and returns the container format to
// stamp on the tensor. The record may be raw (mode 0) when coding does not
// pay; it decodes to weight either way.
func EncodeCoded(f Format, weight []byte) (Format, []byte, error) {
	var cf Format
	switch f {
	case MXFP4:
		cf = MXFP4CFS1
	case Int4Row:
		cf = Int4RowCFS1
	case Int4Grouped:
		cf = Int4GroupedCFS1
	default:
		return 0, nil, fmt.Errorf("%w: %s has no CFS1 container", ErrCoded, f)
	}
	rec, err := cfs1.Encode(weight, cfs1.ModeNibble)
	if err != nil {
		return 0, nil, fmt.Errorf("quant: encode %s: %w", cf, err)
	}
	return cf, rec, nil
}

// EncodeScaleRecord codes an mxfp4 E8M0 scale array as a CFS1 byte record
// (mode 2, or raw when coding does not pay), to be stamped mxfp4-scale-cfs1.
func EncodeScaleRecord(scales []byte) ([]byte, error) {
	rec, err := cfs1.Encode(scales, cfs1.ModeByte)
	if err != nil {
		return nil, fmt.Errorf("quant: encode %s: %w", MXFP4ScaleCFS1, err)
	}
	return rec, nil
}
