package k3_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/trunk"
)

// TestPackedSource: the plan, before anything is allocated, reads a lossless12 pack's matrices
// as the checkpoint's bf16 originals exactly where the format loses — everything resident on
// fewer threads than trunk.Lossless12Threads() — and says which and why; anywhere else (that
// many threads, a budget that streams, originals that would not fit, a pack with nothing encoded) it
// reads the pack. The automatic choice on one thread gives the mapped run's logits without
// reading the pack. (TestLossless12PackedTrunk checks both forced sources' bits at every
// budget.)
func TestPackedSource(t *testing.T) {
	// The break-even of this CPU's kernel level: 2 with AVX-512 (issue 27's design point).
	minT := trunk.Lossless12Threads()
	require.GreaterOrEqual(t, minT, 2)
	below, at := strconv.Itoa(minT-1), strconv.Itoa(minT)
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	l12, _ := packLossless12(t, dir)
	bf := t.TempDir()
	require.NoError(t, checkpoint.PackTrunk(dir, bf, nil))
	packed, err := k3.PlanFor(dir, k3.WithPackedTrunk(l12, trunk.SourcePacked))
	require.NoError(t, err)
	require.Positive(t, packed.Trunk.Lossless12Bytes)
	fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(l12, trunk.SourcePacked))
	// The smallest budget (to 64 KiB) that pins the whole pack; the bf16 originals, larger, would
	// stream under it.
	fits := packed.Trunk.Total
	for ; ; fits += 64 << 10 {
		p, err := k3.PlanFor(dir, k3.WithPackedTrunk(l12, trunk.SourcePacked), k3.WithTrunkBudget(fits))
		require.NoError(t, err)
		if p.Trunk.StreamBytes == 0 {
			break
		}
		require.Less(t, fits, 2*packed.Trunk.Total, "no budget pins the whole pack")
	}

	type sourceCase struct {
		name string
		opts []k3.Option
		src  trunk.Source
		why  string
	}
	cases := []sourceCase{
		{"resident/t1", []k3.Option{k3.WithThreads(1)}, trunk.SourceShards, "fewer than " + at},
		{"resident/t" + at, []k3.Option{k3.WithThreads(minT)}, trunk.SourcePacked, "decoded on " + at + " threads"},
		{"floor/t1", []k3.Option{k3.WithThreads(1), k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot)}, trunk.SourcePacked, "streams"},
		// Everything fits in lossless12, not in bf16.
		{"fits-encoded-only/t1", []k3.Option{k3.WithThreads(1), k3.WithTrunkBudget(fits)}, trunk.SourcePacked, "bf16 originals would stream"},
		{"forced/t1", []k3.Option{k3.WithThreads(1), k3.WithPackedTrunk(l12, trunk.SourcePacked)}, trunk.SourcePacked, "asked for"},
		{"forced/t2", []k3.Option{k3.WithThreads(2), k3.WithPackedTrunk(l12, trunk.SourceShards)}, trunk.SourceShards, "asked for"},
	}
	if minT > 2 {
		cases = append(cases, sourceCase{"resident/t" + below, []k3.Option{k3.WithThreads(minT - 1)}, trunk.SourceShards, "on " + below + " thread(s), fewer than " + at})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := k3.PlanFor(dir, append([]k3.Option{k3.WithPackedTrunk(l12)}, c.opts...)...)
			require.NoError(t, err)
			assert.Equal(t, c.src, p.PackedSource)
			assert.Contains(t, p.PackedReason, c.why)
			if c.src == trunk.SourceShards {
				assert.Zero(t, p.Trunk.Lossless12Bytes, "planned over the originals")
				assert.Contains(t, p.String(), "bf16 originals")
			} else {
				assert.Positive(t, p.Trunk.Lossless12Bytes, "planned over the pack")
				assert.Contains(t, p.String(), "read        the pack")
			}
		})
	}
	t.Run("bf16-pack", func(t *testing.T) {
		p, err := k3.PlanFor(dir, k3.WithPackedTrunk(bf), k3.WithThreads(1))
		require.NoError(t, err)
		assert.Equal(t, trunk.SourcePacked, p.PackedSource)
		assert.Contains(t, p.PackedReason, "no matrix")
	})
	t.Run("auto/t1/bits", func(t *testing.T) {
		want := runModel(t, openModel(t, dir), ref)
		m := openModel(t, dir, k3.WithPackedTrunk(l12), k3.WithThreads(1))
		assert.Equal(t, trunk.SourceShards, m.Plan().PackedSource)
		assert.Equal(t, want, runModel(t, m, ref))
		assert.Zero(t, m.Stats().Trunk.Verified, "nothing of the pack read")
	})
	t.Run("bad-source", func(t *testing.T) {
		_, err := k3.PlanFor(dir, k3.WithPackedTrunk(l12, "zstd"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), `"zstd"`)
		_, err = k3.PlanFor(dir, k3.WithPackedTrunk(l12, trunk.SourcePacked, trunk.SourceShards))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "2 sources")
	})
}
