package safetensors

import "strconv"

// DType is a safetensors element type. Its String form is the name used in
// file headers.
type DType uint8

// The dtypes of §7.2. The zero value is Invalid so that an unset field
// is never mistaken for a real type.
const (
	Invalid DType = iota
	BOOL
	U8
	I8
	I16
	U16
	I32
	U32
	I64
	U64
	F8_E4M3
	F8_E5M2
	F8_E8M0
	F16
	BF16
	F32
	F64
	C64
	F4
	F6_E2M3
	F6_E3M2
	numDTypes
)

var dtypeNames = [numDTypes]string{
	Invalid: "", BOOL: "BOOL", U8: "U8", I8: "I8", I16: "I16", U16: "U16", I32: "I32", U32: "U32",
	I64: "I64", U64: "U64", F8_E4M3: "F8_E4M3", F8_E5M2: "F8_E5M2", F8_E8M0: "F8_E8M0",
	F16: "F16", BF16: "BF16", F32: "F32", F64: "F64", C64: "C64", F4: "F4",
	F6_E2M3: "F6_E2M3", F6_E3M2: "F6_E3M2",
}

var dtypeBits = [numDTypes]uint8{
	BOOL: 8, U8: 8, I8: 8, I16: 16, U16: 16, I32: 32, U32: 32, I64: 64, U64: 64,
	F8_E4M3: 8, F8_E5M2: 8, F8_E8M0: 8, F16: 16, BF16: 16, F32: 32, F64: 64, C64: 64,
	F4: 4, F6_E2M3: 6, F6_E3M2: 6,
}

// String returns the header name of d ("BF16", "F8_E4M3", ...).
func (d DType) String() string {
	if d > Invalid && d < numDTypes {
		return dtypeNames[d]
	}
	return "DType(" + strconv.Itoa(int(d)) + ")"
}

// Valid reports whether d is one of the known dtypes.
func (d DType) Valid() bool { return d > Invalid && d < numDTypes }

// Bits returns the width of one element in bits, or 0 for an invalid dtype.
func (d DType) Bits() int {
	if d < numDTypes {
		return int(dtypeBits[d])
	}
	return 0
}

// ParseDType maps a header name to its DType. Names are case-sensitive, as
// in the format.
func ParseDType(name string) (DType, bool) {
	return lookupDType([]byte(name))
}

// lookupDType avoids allocating a string for every header entry: the
// compiler does not allocate for string(b) in a comparison.
func lookupDType(b []byte) (DType, bool) {
	switch len(b) {
	case 2:
		switch string(b) {
		case "U8":
			return U8, true
		case "I8":
			return I8, true
		case "F4":
			return F4, true
		}
	case 3:
		switch string(b) {
		case "F32":
			return F32, true
		case "F16":
			return F16, true
		case "I16":
			return I16, true
		case "U16":
			return U16, true
		case "I32":
			return I32, true
		case "U32":
			return U32, true
		case "I64":
			return I64, true
		case "U64":
			return U64, true
		case "F64":
			return F64, true
		case "C64":
			return C64, true
		}
	case 4:
		switch string(b) {
		case "BF16":
			return BF16, true
		case "BOOL":
			return BOOL, true
		}
	case 7:
		switch string(b) {
		case "F8_E4M3":
			return F8_E4M3, true
		case "F8_E5M2":
			return F8_E5M2, true
		case "F8_E8M0":
			return F8_E8M0, true
		case "F6_E2M3":
			return F6_E2M3, true
		case "F6_E3M2":
			return F6_E3M2, true
		}
	}
	return Invalid, false
}

// byteSize returns numel·bits/8 for shape, with overflow detection. The
// sentinel tells which rule failed.
func byteSize(d DType, shape []int64) (numel, nbytes int64, err error) {
	numel = 1
	for _, s := range shape {
		if s < 0 {
			return 0, 0, ErrBadInteger
		}
		if s == 0 {
			// An empty dimension makes the product 0 whatever the others are,
			// so the result must not depend on where the zero sits.
			numel = 0
			break
		}
	}
	for _, s := range shape {
		if numel == 0 {
			break
		}
		if numel > maxInt64/s {
			return 0, 0, ErrNumelOverflow
		}
		numel *= s
	}
	bits := int64(d.Bits())
	if bits == 0 {
		return 0, 0, ErrUnknownDType
	}
	if numel > maxInt64/bits {
		return 0, 0, ErrNumelOverflow
	}
	nb := numel * bits
	if nb%8 != 0 {
		return 0, 0, ErrSubByteAlignment
	}
	return numel, nb / 8, nil
}

const maxInt64 = 1<<63 - 1
