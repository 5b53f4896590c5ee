package checkpoint

import (
	"fmt"

	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/safetensors"
)

// TensorStats is what the lossless12 format (§6.11) makes of one bf16
// matrix of a checkpoint.
type TensorStats struct {
	Name  string
	Layer int // −1 for the embedding, the output head and the other tensors outside the layers
	lossless12.Stats
}

// measureChunk bounds the bytes MeasureLossless12 holds of a tensor at once.
const measureChunk = 8 << 20

// MeasureLossless12 reads every 2-D BF16 tensor of the trunk (§3.4), the
// embedding and the output head of the checkpoint in modelDir, a few
// megabytes at a time, and returns what lossless12 would make of each
// (bits per weight, escape rate and width, exponent entropy), in the
// checkpoint's order. It tells what packing the trunk in lossless12 saves
// before anything is written.
func MeasureLossless12(modelDir string) ([]TensorStats, error) {
	ck, err := safetensors.Open(modelDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: measure %s: %w", modelDir, err)
	}
	defer ck.Close()
	var out []TensorStats
	var buf []byte
	for _, t := range ck.Tensors() {
		if class, ok := layout.Classify(t.Name); !ok || (class != layout.Trunk && class != layout.EmbedHead) ||
			t.DType.String() != "BF16" || len(t.Shape) != 2 {
			continue
		}
		rows, cols := t.Shape[0], t.Shape[1]
		if rows <= 0 || cols <= 0 || cols >= lossless12.MaxDim || rows >= lossless12.MaxDim {
			continue
		}
		mt, err := lossless12.NewMeter(int(cols))
		if err != nil {
			return nil, fmt.Errorf("checkpoint: measure %s: tensor %s: %w", modelDir, t.Name, err)
		}
		rb := 2 * cols
		step := max(1, measureChunk/rb) * rb
		for off := int64(0); off < t.Size; off += step {
			n := min(step, t.Size-off)
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			if err := ck.ReadAt(t, buf[:n], off); err != nil {
				return nil, fmt.Errorf("checkpoint: measure %s: %w", modelDir, err)
			}
			if err := mt.Add(buf[:n]); err != nil {
				return nil, fmt.Errorf("checkpoint: measure %s: tensor %s: %w", modelDir, t.Name, err)
			}
		}
		layer, ok := layout.LayerOf(t.Name)
		if !ok {
			layer = -1
		}
		out = append(out, TensorStats{Name: t.Name, Layer: layer, Stats: mt.Stats()})
	}
	return out, nil
}
