package trunk

import (
	"fmt"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
)

// Item numbers what a tensor belongs to: a decoder layer (0 … NumLayers−1) or one of these.
const (
	Head  = -1 // the output head, walked after the last layer
	Embed = -2 // the embedding table, gathered by rows, never part of the walk
)

// Tensor describes one dense weight matrix: where its bytes are and how the layer math uses it.
// Small vectors are not Tensors: callers widen them to float32 once at open and count them as
// side bytes.
type Tensor struct {
	Item   int    // layer index, Head or Embed
	Name   string // for errors and tracing
	File   string // path of the file holding the bytes
	Offset int64  // absolute offset of the first byte in File
	Size   int64  // byte length, = Rows·Cols·dtype size
	DType  safetensors.DType
	Rows   int
	Cols   int
	// Whole asks for the matrix to be streamed as one piece: the layer reads its rows in an
	// order of its own (MLA's kv_b_proj is read row by row by every head), so it must be resident
	// as a whole while the layer uses it.
	Whole bool
}

// rowBytes returns the bytes of one row.
func (t *Tensor) rowBytes() int64 { return t.Size / int64(t.Rows) }

// ctor returns the constructor of the tensor's quant format.
func (t *Tensor) ctor() (func(rows, cols int, b []byte) (quant.Matrix, error), error) {
	switch t.DType {
	case safetensors.BF16:
		return quant.NewBF16, nil
	case safetensors.F16:
		return quant.NewF16, nil
	case safetensors.F32:
		return quant.NewF32, nil
	}
	return nil, fmt.Errorf("%w: %s is %v (want BF16, F16 or F32)", ErrTensor, t.Name, t.DType)
}

func (t *Tensor) check() error {
	if t.Rows <= 0 || t.Cols <= 0 {
		return fmt.Errorf("%w: %s has shape [%d, %d]", ErrTensor, t.Name, t.Rows, t.Cols)
	}
	bits := t.DType.Bits()
	if bits%8 != 0 || int64(t.Rows)*int64(t.Cols)*int64(bits/8) != t.Size {
		return fmt.Errorf("%w: %s: %d bytes for %v [%d, %d]", ErrTensor, t.Name, t.Size, t.DType, t.Rows, t.Cols)
	}
	if t.Offset < 0 {
		return fmt.Errorf("%w: %s: negative offset %d", ErrTensor, t.Name, t.Offset)
	}
	if t.Item < Embed {
		return fmt.Errorf("%w: %s: item %d", ErrTensor, t.Name, t.Item)
	}
	_, err := t.ctor()
	return err
}
