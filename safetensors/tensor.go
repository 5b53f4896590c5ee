package safetensors

import "strconv"

// Tensor locates one tensor in a shard file.
type Tensor struct {
	Name  string
	DType DType
	shard int32 // here, not last, so that it fills DType's padding

	Shape  []int64 // shares a per-shard backing array; do not modify
	File   string  // path of the shard file holding it
	Offset int64   // absolute byte offset of the data in File
	Size   int64   // byte length
}

// NumElements returns the product of the dimensions (1 for a scalar).
// The open-time validation guarantees it does not overflow.
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// String describes t for logs: name, dtype, shape and location.
func (t *Tensor) String() string {
	return strconv.Quote(t.Name) + " " + t.DType.String() + fmtShape(t.Shape) +
		" @" + t.File + "+" + strconv.FormatInt(t.Offset, 10) + " (" + strconv.FormatInt(t.Size, 10) + " bytes)"
}
