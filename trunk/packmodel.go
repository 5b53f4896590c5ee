package trunk

import (
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/k3-project/k3/internal/fileio/strictjson"
	"github.com/k3-project/k3/storage"
)

// modelRuns are trunk.json's optional top-level runs of the tensors outside the layers (§8.2),
// in the order a pack writes them after the last layer.
var modelRuns = [...]struct {
	key  string
	item int
}{{"embedding", Embed}, {"head", Head}}

// Runs returns every run of the pack in trunk.bin order: the layers, then the embedding table
// and the output head when the pack holds them.
func (l *Layout) Runs() []LayerRun {
	runs := slices.Clone(l.Layers)
	for _, r := range []*LayerRun{l.Embedding, l.Head} {
		if r != nil {
			runs = append(runs, *r)
		}
	}
	return runs
}

// run returns the layout's run for a modelRuns item.
func (l *Layout) run(item int) **LayerRun {
	if item == Embed {
		return &l.Embedding
	}
	return &l.Head
}

// parseModelRuns reads trunk.json's optional "embedding" and "head" runs (§8.2, §8.3). Each is
// an object like a layer's without "layer", "shard" and "run_start" (a pack gathers the tensor
// into it): file_off and nbytes multiples of 4096, the run inside trunk.bin and after every run
// before it (from end on), an optional sha256, and exactly one tensor — a two-dimensional matrix
// in BF16 or lossless12 — that exp.Tensor accepts for the item (Embed or Head). A trunk.json
// without them (every older one, and every bf16 pack) is valid: the shards then provide both.
func parseModelRuns(v *strictjson.Value, l *Layout, end, binSize int64, exp Expect) error {
	for _, mr := range modelRuns {
		rv := v.Get(mr.key)
		if rv == nil {
			continue
		}
		if rv.Kind() != strictjson.Object {
			return layoutErr("%s is %v, want an object", mr.key, rv.Kind())
		}
		r := &LayerRun{Layer: mr.item}
		var err error
		if r.NBytes, err = int64Field(rv, "nbytes"); err != nil {
			return fmt.Errorf("%s: %w", mr.key, err)
		}
		if r.FileOff, err = int64Field(rv, "file_off"); err != nil {
			return fmt.Errorf("%s: %w", mr.key, err)
		}
		if r.FileOff < 0 || r.NBytes < 0 || r.FileOff%storage.Alignment != 0 || r.NBytes%storage.Alignment != 0 {
			return layoutErr("%s: file_off %d and nbytes %d must be non-negative multiples of 4096", mr.key, r.FileOff, r.NBytes)
		}
		if r.FileOff < end {
			return layoutErr("%s: file_off %d overlaps or precedes the run before it (ends at %d)", mr.key, r.FileOff, end)
		}
		if r.FileOff > binSize || r.NBytes > binSize-r.FileOff {
			return layoutErr("%s: run [%d, +%d) ends past trunk.bin (%d bytes)", mr.key, r.FileOff, r.NBytes, binSize)
		}
		if sv := rv.Get("sha256"); sv != nil {
			s, err := sv.Str()
			if err != nil {
				return layoutErr("%s: sha256: %v", mr.key, err)
			}
			if r.SHA256, err = hex.DecodeString(s); err != nil || len(r.SHA256) != 32 {
				return layoutErr("%s: sha256 %q is not 64 hex digits", mr.key, s)
			}
		}
		tv := rv.Get("tensors")
		if tv == nil || tv.Kind() != strictjson.Object || tv.Len() != 1 {
			return layoutErr("%s: tensors missing, not an object or not exactly one tensor", mr.key)
		}
		where := itemName(mr.item)
		t, err := parseRunTensor(tv.Members()[0], where)
		if err != nil {
			return err
		}
		if len(t.Shape) != 2 || (t.DType != "BF16" && t.Format != FormatLossless12) {
			return layoutErr("%s: %s is %s %v, want a BF16 or lossless12 matrix", where, t.Name, t.DType, t.Shape)
		}
		if t.Off > r.NBytes || t.NBytes > r.NBytes-t.Off {
			return layoutErr("%s: %s [%d, +%d) ends past the run (%d bytes)", where, t.Name, t.Off, t.NBytes, r.NBytes)
		}
		if exp.Tensor != nil {
			if err := exp.Tensor(mr.item, t); err != nil {
				return layoutErr("%s: %s: %v", where, t.Name, err)
			}
		}
		r.Tensors, r.Unpadded = []RunTensor{t}, t.Off+t.NBytes
		*l.run(mr.item) = r
		end = r.FileOff + r.NBytes
	}
	return nil
}
