package quant

import (
	"fmt"
	"strconv"
)

// Format identifies a weight encoding. Its on-disk identity is the name
// returned by String; the ordinal is an in-process identifier only (never
// written to disk), stable across releases of this library. Ordinals 0–8
// equal Colibrì's public ordinals for the same names; ordinals ≥ 16 belong to
// this library (§6.1).
type Format uint8

// The registered formats (§6.1).
const (
	F32             Format = 0  // "f32": little-endian float32 [O, I], no scales.
	Int8Row         Format = 1  // "int8-row": int8 [O, I] with one F32 scale per row.
	Int4Row         Format = 2  // "int4-row": offset-8 nibbles [O, ⌈I/2⌉] with one F32 scale per row.
	Int2Row         Format = 3  // "int2-row": name reserved, not implemented.
	Int4Grouped     Format = 4  // "int4-grouped": offset-8 nibbles with F32 scales [O, ⌈I/gs⌉].
	Int3G64         Format = 5  // "int3-g64": name reserved, not implemented.
	E8IQ3Lattice    Format = 6  // "e8-iq3-lattice": name reserved, not implemented.
	MXFP4           Format = 7  // "mxfp4": E2M1 nibbles with E8M0 scales per 32 elements.
	FP8E4M3B128     Format = 8  // "fp8-e4m3-b128": E4M3 bytes with F32 scales per 128×128 block.
	BF16            Format = 16 // "bf16": little-endian bfloat16 [O, I], no scales.
	F16             Format = 17 // "f16": little-endian IEEE binary16 [O, I], no scales.
	Lossless12      Format = 18 // "lossless12": bf16 weights, losslessly in about 11.4 bits (quant/lossless12), no scales.
	MXFP4CFS1       Format = 32 // "mxfp4-cfs1": mxfp4 weights in a CFS1 record.
	Int4RowCFS1     Format = 33 // "int4-row-cfs1": int4-row weights in a CFS1 record.
	Int4GroupedCFS1 Format = 34 // "int4-grouped-cfs1": int4-grouped weights in a CFS1 record.
	Int4Rans256G0   Format = 35 // "int4-rans256-g0": Colibrì's 256-stream rANS record.
	MXFP4ScaleCFS1  Format = 36 // "mxfp4-scale-cfs1": stamped on a scale tensor, E8M0 bytes in a CFS1 record.
)

// Status says what this build can do with a format.
type Status uint8

const (
	// StatusUnknown is the status of an ordinal that names no format.
	StatusUnknown Status = iota
	// StatusImplemented formats have kernels, quantizers and dequantizers.
	StatusImplemented
	// StatusReserved formats have a registered name but no implementation;
	// they are refused by name wherever they are met.
	StatusReserved
	// StatusUnsupported formats are entropy-coded containers (§6.9)
	// whose optional decoder this build lacks (int4-rans256-g0); they are
	// refused by name.
	StatusUnsupported
)

func (s Status) String() string {
	switch s {
	case StatusImplemented:
		return "implemented"
	case StatusReserved:
		return "reserved"
	case StatusUnsupported:
		return "decoder not in this build"
	}
	return "unknown"
}

type formatInfo struct {
	name   string
	status Status
	base   Format // for coded formats: the format of the decoded bytes
}

// registry is a constant table indexed by ordinal; a zero name means the
// ordinal is unassigned.
var registry = [...]formatInfo{
	F32:             {"f32", StatusImplemented, F32},
	Int8Row:         {"int8-row", StatusImplemented, Int8Row},
	Int4Row:         {"int4-row", StatusImplemented, Int4Row},
	Int2Row:         {"int2-row", StatusReserved, Int2Row},
	Int4Grouped:     {"int4-grouped", StatusImplemented, Int4Grouped},
	Int3G64:         {"int3-g64", StatusReserved, Int3G64},
	E8IQ3Lattice:    {"e8-iq3-lattice", StatusReserved, E8IQ3Lattice},
	MXFP4:           {"mxfp4", StatusImplemented, MXFP4},
	FP8E4M3B128:     {"fp8-e4m3-b128", StatusImplemented, FP8E4M3B128},
	BF16:            {"bf16", StatusImplemented, BF16},
	F16:             {"f16", StatusImplemented, F16},
	Lossless12:      {"lossless12", StatusImplemented, Lossless12},
	MXFP4CFS1:       {"mxfp4-cfs1", StatusImplemented, MXFP4},
	Int4RowCFS1:     {"int4-row-cfs1", StatusImplemented, Int4Row},
	Int4GroupedCFS1: {"int4-grouped-cfs1", StatusImplemented, Int4Grouped},
	Int4Rans256G0:   {"int4-rans256-g0", StatusUnsupported, Int4Row},
	MXFP4ScaleCFS1:  {"mxfp4-scale-cfs1", StatusImplemented, MXFP4ScaleCFS1},
}

func (f Format) info() (formatInfo, bool) {
	if int(f) >= len(registry) || registry[f].name == "" {
		return formatInfo{}, false
	}
	return registry[f], true
}

// String returns the stable on-disk name, or "format(N)" for an unassigned
// ordinal.
func (f Format) String() string {
	if in, ok := f.info(); ok {
		return in.name
	}
	return "format(" + strconv.Itoa(int(f)) + ")"
}

// Known reports whether f is a registered ordinal.
func (f Format) Known() bool { _, ok := f.info(); return ok }

// Status returns what this build can do with f.
func (f Format) Status() Status {
	in, ok := f.info()
	if !ok {
		return StatusUnknown
	}
	return in.status
}

// Implemented reports whether this build handles f: plain and packed formats
// are multiplied, quantized and dequantized; the CFS1 containers
// (mxfp4-cfs1, int4-row-cfs1, int4-grouped-cfs1, mxfp4-scale-cfs1) are
// decoded (see ResolveCoded).
func (f Format) Implemented() bool { return f.Status() == StatusImplemented }

// Coded reports whether f is an entropy-coded container (ordinal ≥ 32).
func (f Format) Coded() bool { return f >= 32 && f.Known() }

// Base returns the format of the decoded bytes of a coded format and f
// itself otherwise.
func (f Format) Base() Format {
	if in, ok := f.info(); ok {
		return in.base
	}
	return f
}

// Formats returns every registered format in ordinal order.
func Formats() []Format {
	var out []Format
	for i := range registry {
		if registry[i].name != "" {
			out = append(out, Format(i))
		}
	}
	return out
}

// ParseFormat returns the format with the given stable name. Names are
// case-sensitive; an unknown name yields an error matching ErrUnknownFormat.
func ParseFormat(name string) (Format, error) {
	for i := range registry {
		if registry[i].name != "" && registry[i].name == name {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownFormat, name)
}
