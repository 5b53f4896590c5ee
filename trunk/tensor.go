package trunk

import (
	"fmt"

	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/safetensors"
)

// Item numbers what a tensor belongs to: a decoder layer (0 … NumLayers−1) or one of these.
const (
	Head  = -1 // the output head, walked after the last layer
	Embed = -2 // the embedding table, gathered by rows, never part of the walk
)

// Tensor describes one dense weight matrix: where its bytes are and how the layer math uses it.
// Small vectors are not Tensors: callers read them once at open and count what they hold as
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
	// Format is the encoding of a U8 tensor: quant.Lossless12 (§6.11), whose Escapes escape
	// bytes per row fix its row length. Offset and Size then cover its rows, after the header,
	// which the caller has checked against the shape. It is ignored for BF16, F16 and F32.
	Format  quant.Format
	Escapes int
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
	case safetensors.U8:
		if t.Format == quant.Lossless12 {
			e, name := t.Escapes, t.Name
			return func(rows, cols int, b []byte) (quant.Matrix, error) {
				m, err := quant.NewLossless12Rows(rows, cols, e, b)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err) // a malformed piece names its tensor
				}
				return m, nil
			}, nil
		}
	}
	return nil, fmt.Errorf("%w: %s is %v (want BF16, F16, F32 or U8 in lossless12)", ErrTensor, t.Name, t.DType)
}

func (t *Tensor) check() error {
	if t.Rows <= 0 || t.Cols <= 0 {
		return fmt.Errorf("%w: %s has shape [%d, %d]", ErrTensor, t.Name, t.Rows, t.Cols)
	}
	if t.DType == safetensors.U8 && t.Format == quant.Lossless12 {
		want, err := quant.WeightBytes(quant.Lossless12, t.Rows, t.Cols, t.Escapes)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrTensor, t.Name, err)
		}
		if want -= lossless12.HeaderSize; t.Size != want {
			return fmt.Errorf("%w: %s: %d bytes of lossless12 rows for [%d, %d] with %d escape bytes, want %d",
				ErrTensor, t.Name, t.Size, t.Rows, t.Cols, t.Escapes, want)
		}
	} else if bits := t.DType.Bits(); bits%8 != 0 || int64(t.Rows)*int64(t.Cols)*int64(bits/8) != t.Size {
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
