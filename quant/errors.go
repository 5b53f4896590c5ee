package quant

import "errors"

// Sentinel errors. Every error returned by this package matches one of them
// with errors.Is; the typed errors below carry the observed and expected
// numbers.
var (
	// ErrUnknownFormat reports a format name or ordinal that is not registered.
	ErrUnknownFormat = errors.New("quant: unknown format")
	// ErrNotImplemented reports a registered format this build cannot decode:
	// a reserved name, UE8M0 fp8 block scales, or an entropy-coded container.
	ErrNotImplemented = errors.New("quant: format not implemented")
	// ErrShape reports negative or overflowing dimensions, or buffers whose
	// lengths do not match the matrix shape.
	ErrShape = errors.New("quant: invalid shape")
	// ErrWeightSize reports a weight byte count that matches no layout.
	ErrWeightSize = errors.New("quant: weight byte count matches no layout")
	// ErrScaleSize reports a scale byte count that does not match the format.
	ErrScaleSize = errors.New("quant: scale byte count does not match the format")
	// ErrDType reports a tensor dtype the format does not admit.
	ErrDType = errors.New("quant: dtype not admitted")
	// ErrGroupSize reports an int4-grouped group size outside the allowed set.
	ErrGroupSize = errors.New("quant: invalid group size")
	// ErrNonFinite reports a NaN or infinite weight given to a quantizer.
	ErrNonFinite = errors.New("quant: non-finite weight")
	// ErrStamp reports a metadata stamp that is malformed, conflicting,
	// unknown or in disagreement with the bytes (§6.8).
	ErrStamp = errors.New("quant: metadata stamp refused")
)
