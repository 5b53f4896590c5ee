package k3

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/trunk"
)

// packedTrunk is an opened trunk.bin + trunk.json: per-layer tensors are looked up here instead
// of in the checkpoint's shards.
type packedTrunk struct {
	bin, layoutPath string
	layout          *trunk.Layout
	tensors         map[string]*safetensors.Tensor
	f               *os.File
}

func openPacked(dir string, cfg *config.Config) (*packedTrunk, error) {
	exp := trunk.Expect{Tensor: func(layer int, t trunk.RunTensor) error {
		if !strings.HasPrefix(t.Name, layerPrefix(layer)) {
			return fmt.Errorf("not a tensor of layer %d (want prefix %s)", layer, layerPrefix(layer))
		}
		return nil
	}}
	l, err := trunk.ReadLayout(dir, cfg.NumLayers, exp)
	if err != nil {
		return nil, err
	}
	p := &packedTrunk{bin: filepath.Join(dir, trunk.BinName), layoutPath: filepath.Join(dir, trunk.LayoutName),
		layout: l, tensors: map[string]*safetensors.Tensor{}}
	for _, r := range l.Layers {
		for _, t := range r.Tensors {
			dt, _ := safetensors.ParseDType(t.DType) // ReadLayout allowed only known dtypes
			p.tensors[t.Name] = &safetensors.Tensor{Name: t.Name, DType: dt, Shape: t.Shape, File: p.bin,
				Offset: r.FileOff + t.Off, Size: t.NBytes}
		}
	}
	if p.f, err = os.Open(p.bin); err != nil {
		return nil, fmt.Errorf("packed trunk: %w", err)
	}
	return p, nil
}

// readF32 reads a small tensor of trunk.bin and widens it exactly.
func (p *packedTrunk) readF32(t *safetensors.Tensor) ([]float32, error) {
	buf := make([]byte, t.Size)
	if _, err := p.f.ReadAt(buf, t.Offset); err != nil {
		if err == io.EOF {
			err = safetensors.ErrShortRead
		}
		return nil, fmt.Errorf("%s: read %s: %w", p.bin, t.Name, err)
	}
	dst := make([]float32, t.NumElements())
	if err := safetensors.WidenF32(dst, buf, t.DType); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", p.bin, t.Name, err)
	}
	return dst, nil
}

func (p *packedTrunk) close() error {
	if p == nil || p.f == nil {
		return nil
	}
	return p.f.Close()
}
