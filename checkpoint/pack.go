package checkpoint

import (
	"fmt"
	"path/filepath"

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
func PackTrunk(modelDir, outDir string, progress func(done, total int64)) error {
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
	if _, err := trunk.Pack(outDir, layers, trunk.PackOptions{Progress: progress}); err != nil {
		return fmt.Errorf("checkpoint: pack-trunk %s: %w", modelDir, err)
	}
	return nil
}

// trunkTensors lists each layer's trunk tensors (§3.4's class, by name).
func trunkTensors(ck *safetensors.Checkpoint, cfg *config.Config) ([][]trunk.SourceTensor, error) {
	layers := make([][]trunk.SourceTensor, cfg.NumLayers)
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
			DType: t.DType.String(), Shape: t.Shape})
	}
	return layers, nil
}
