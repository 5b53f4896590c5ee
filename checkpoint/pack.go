package checkpoint

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/trunk"
)

// PackTrunk copies the trunk of the checkpoint in modelDir (every tensor of every decoder layer
// except routed experts, §3.4) into outDir/trunk.bin and outDir/trunk.json (§8),
// which k3.WithPackedTrunk reads. progress, if not nil, receives the bytes copied and the total.
// The files are compatible with kimi-k3-in-c's; a layer whose tensors are not one contiguous
// run of one shard is gathered instead of refused.
//
// By default the tensors are copied as they are. WithTrunkFormat("lossless12") encodes every
// two-dimensional bf16 matrix in lossless12 (§6.11), keeping one in bf16 where the format would
// not save bytes, and packs the embedding table and the output head too, each in a run of its
// own after the layers; trunk.json then records each tensor's format and escape bytes, and
// k3.WithPackedTrunk reads it with logits bit-identical to the bf16 pack's.
func PackTrunk(modelDir, outDir string, progress func(done, total int64), opts ...PackOption) error {
	var po trunk.PackOptions
	for _, o := range opts {
		o(&po)
	}
	po.Progress = progress
	switch po.Format {
	case "", trunk.FormatBF16, trunk.FormatLossless12:
	default:
		return fmt.Errorf("checkpoint: pack-trunk %s: %w: %q (want %s or %s)", modelDir, ErrTrunkFormat, po.Format,
			trunk.FormatBF16, trunk.FormatLossless12)
	}
	cfg, err := config.Load(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return fmt.Errorf("checkpoint: pack-trunk %s: %w", modelDir, err)
	}
	ck, err := safetensors.Open(modelDir)
	if err != nil {
		return fmt.Errorf("checkpoint: pack-trunk %s: %w", modelDir, err)
	}
	defer ck.Close()
	layers, err := trunkTensors(ck, cfg)
	if err != nil {
		return fmt.Errorf("checkpoint: pack-trunk %s: %w", modelDir, err)
	}
	if po.Format == trunk.FormatLossless12 {
		// The embedding table and the head are the largest matrices after the layers' (2.35 GB
		// each in K3): an encoded pack holds them too.
		for _, e := range []struct {
			name string
			dst  **trunk.SourceTensor
		}{{layout.EmbedName, &po.Embedding}, {layout.HeadName, &po.Head}} {
			t, err := ck.Require(e.name)
			if err != nil {
				return fmt.Errorf("checkpoint: pack-trunk %s: %w", modelDir, err)
			}
			*e.dst = &trunk.SourceTensor{Name: t.Name, File: t.File, Offset: t.Offset, Size: t.Size,
				DType: t.DType.String(), Shape: t.Shape, Matrix: true}
		}
	}
	// The trunk names its model (§3.6), so that it is refused with any other.
	id, _, err := Identify(ck, cfg)
	if err != nil {
		return fmt.Errorf("checkpoint: pack-trunk %s: %w", modelDir, err)
	}
	po.Model = id.String()
	if _, err := trunk.Pack(outDir, layers, po); err != nil {
		return fmt.Errorf("checkpoint: pack-trunk %s: %w", modelDir, err)
	}
	return nil
}

// ErrTrunkFormat reports a packed-trunk format PackTrunk does not write.
var ErrTrunkFormat = errors.New("checkpoint: unknown trunk format")

// PackOption configures PackTrunk.
type PackOption func(*trunk.PackOptions)

// WithTrunkFormat chooses the packed trunk's encoding: "bf16" (the default: every tensor as the
// checkpoint stores it) or "lossless12" (§6.11).
func WithTrunkFormat(format string) PackOption {
	return func(o *trunk.PackOptions) { o.Format = format }
}

// TrunkExpect returns what a packed trunk of a released checkpoint must hold beyond its own
// consistency (trunk.ReadLayout, trunk.OpenPacked): every layer run's tensors are that layer's,
// the embedding and head runs hold the embedding table and the output head, and, when model is
// not empty, trunk.json names that model's identity (§3.6; Identity.String).
func TrunkExpect(model string) trunk.Expect {
	return trunk.Expect{Model: model, Tensor: func(layer int, t trunk.RunTensor) error {
		switch {
		case layer == trunk.Embed && t.Name != layout.EmbedName:
			return fmt.Errorf("not the embedding table (%s)", layout.EmbedName)
		case layer == trunk.Head && t.Name != layout.HeadName:
			return fmt.Errorf("not the output head (%s)", layout.HeadName)
		case layer >= 0 && !strings.HasPrefix(t.Name, layout.LayerPrefix(layer)):
			return fmt.Errorf("not a tensor of layer %d (want prefix %s)", layer, layout.LayerPrefix(layer))
		}
		return nil
	}}
}

// trunkTensors lists each layer's trunk tensors (§3.4's class, by name).
func trunkTensors(ck *safetensors.Checkpoint, cfg *config.Config) ([][]trunk.SourceTensor, error) {
	layers := make([][]trunk.SourceTensor, cfg.NumLayers)
	matrices := map[string]bool{} // the weight matrices of the layer math, which a format may encode
	for l := range cfg.NumLayers {
		for _, s := range layout.Layer(cfg, l) {
			if s.Kind == layout.Matrix {
				matrices[s.Name] = true
			}
		}
	}
	for _, t := range ck.Tensors() {
		if class, ok := layout.Classify(t.Name); !ok || class != layout.Trunk {
			continue
		}
		l, ok := layout.LayerOf(t.Name)
		if !ok {
			return nil, fmt.Errorf("tensor %s: cannot read its layer number", t.Name)
		}
		if l >= cfg.NumLayers {
			return nil, fmt.Errorf("tensor %s belongs to layer %d, the configuration has %d layers", t.Name, l, cfg.NumLayers)
		}
		layers[l] = append(layers[l], trunk.SourceTensor{Name: t.Name, File: t.File, Offset: t.Offset, Size: t.Size,
			DType: t.DType.String(), Shape: t.Shape, Matrix: matrices[t.Name]})
	}
	return layers, nil
}
