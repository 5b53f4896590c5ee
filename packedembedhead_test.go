package k3_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/trunk"
)

// TestPackedEmbedHeadFaults: the embedding table and the head of a lossless12 pack are covered
// like its layers. A flipped bit fails the run's checksum, under its name, in Verify and in the
// model, resident (at Open) or streamed (at the first forward); a malformed block whose checksum
// was made to match is refused by tensor name, never decoded into a weight — for the streamed
// embedding in the row the forward reads.
func TestPackedEmbedHeadFaults(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	runs := []struct {
		name string // as the errors say
		item int
		run  func(l *trunk.Layout) trunk.LayerRun
	}{
		{"embedding", trunk.Embed, func(l *trunk.Layout) trunk.LayerRun { return *l.Embedding }},
		{"lm_head", trunk.Head, func(l *trunk.Layout) trunk.LayerRun { return *l.Head }},
	}
	// open opens the model on the pack p, resident or at its floor, and runs a forward.
	open := func(t *testing.T, p string, resident bool) error {
		opts := []k3.Option{k3.WithPackedTrunk(p, trunk.SourcePacked)}
		if !resident {
			fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(p, trunk.SourcePacked))
			opts = append(opts, k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot))
		}
		m, err := k3.Open(dir, opts...)
		if err != nil {
			return err
		}
		defer m.Close()
		_, err = m.Forward(t.Context(), ref.FullIDs)
		return err
	}
	for _, c := range runs {
		for _, resident := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/flipped-bit/resident=%v", c.name, resident), func(t *testing.T) {
				p, l := packLossless12(t, dir)
				r := c.run(l)
				rt := r.Tensors[0]
				require.Equal(t, trunk.FormatLossless12, rt.Format)
				testkit.FlipBits(t, filepath.Join(p, trunk.BinName), r.FileOff+rt.Off+rt.NBytes/2, 0x04)
				err := open(t, p, resident)
				require.ErrorIs(t, err, trunk.ErrChecksum)
				assert.Contains(t, err.Error(), c.name)
				err = verifyPacked(t, dir, p)
				require.ErrorIs(t, err, trunk.ErrChecksum)
				le, ok := errors.AsType[*trunk.LayerError](err)
				require.True(t, ok)
				assert.Equal(t, c.item, le.Layer)
			})
			t.Run(fmt.Sprintf("%s/malformed-block/resident=%v", c.name, resident), func(t *testing.T) {
				p, l := packLossless12(t, dir)
				r := c.run(l)
				rt := r.Tensors[0]
				row := int64(ref.FullIDs[0]) // a row every forward reads: the first token's embedding
				rowBytes := (rt.NBytes - lossless12.HeaderSize) / rt.Shape[0]
				// The row's first window base, above the largest a window may have (241).
				patchBin(t, p, r, r.FileOff+rt.Off+lossless12.HeaderSize+row*rowBytes, []byte{242}, true)
				err := verifyPacked(t, dir, p)
				require.ErrorIs(t, err, lossless12.ErrMalformed)
				assert.NotErrorIs(t, err, trunk.ErrChecksum)
				err = open(t, p, resident)
				require.ErrorIs(t, err, lossless12.ErrMalformed)
				assert.Contains(t, err.Error(), rt.Name)
			})
		}
	}
}

// TestPackedWithoutEmbedHead: a lossless12 pack whose trunk.json lacks the "embedding" and
// "head" runs (as every pack written before they existed) still opens: the shards provide
// both, in bf16, and the logits are the mapped run's.
func TestPackedWithoutEmbedHead(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	want := runModel(t, openModel(t, dir), ref)
	p, _ := packLossless12(t, dir)
	path := filepath.Join(p, trunk.LayoutName)
	js, err := os.ReadFile(path)
	require.NoError(t, err)
	var d map[string]any
	require.NoError(t, json.Unmarshal(js, &d))
	require.Contains(t, d, "embedding")
	require.Contains(t, d, "head")
	delete(d, "embedding")
	delete(d, "head")
	js, err = json.Marshal(d)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, js, 0o644))

	fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(p, trunk.SourcePacked))
	for _, opts := range [][]k3.Option{nil, {k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot)}} {
		m := openModel(t, dir, append(opts, k3.WithPackedTrunk(p, trunk.SourcePacked))...)
		c := m.Config()
		assert.Equal(t, int64(c.Vocab)*int64(c.Hidden)*2, m.Plan().Trunk.HeadBytes, "the head in bf16, from the shards")
		assert.Equal(t, want, runModel(t, m, ref))
		assert.Equal(t, c.NumLayers, m.Stats().Trunk.Verified, "the layers only")
	}
}
