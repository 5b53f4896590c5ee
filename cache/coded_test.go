package cache_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/cfs1"
	"github.com/k3-project/k3/quant/rans"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// expertWeight is the routed-expert selection of k3 compress-experts.
var expertWeight = regexp.MustCompile(`\.block_sparse_moe\.experts\.[0-9]+\.w[123]\.weight_packed$`)

func selectExperts(name string) (string, bool) {
	if !expertWeight.MatchString(name) {
		return "", false
	}
	return strings.TrimSuffix(name, "_packed") + "_scale", true
}

// repack writes dir with its routed-expert weights entropy-coded.
func repack(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+"-cfs1")
	_, err := rans.Repack(dir, out, rans.RepackOptions{Select: selectExperts, Workers: 2})
	require.NoError(t, err)
	return out
}

// codedRecord returns a nibble-coded (not raw-fallback) expert record of ck.
func codedRecord(t testing.TB, ck *safetensors.Checkpoint) *safetensors.Tensor {
	t.Helper()
	for _, tn := range ck.Tensors() {
		if !expertWeight.MatchString(tn.Name) || len(tn.Shape) != 1 {
			continue
		}
		b, err := ck.Bytes(tn)
		require.NoError(t, err)
		if b[4] == cfs1.ModeNibble {
			return tn
		}
	}
	require.FailNow(t, "no nibble-coded expert record")
	return nil
}

// flipFrequencyBit flips the lowest bit of the first frequency of record tn
// in its shard file: the frequencies then no longer sum to 4096, which the
// decoder always refuses, while the header Inspect reads stays valid.
func flipFrequencyBit(t testing.TB, tn *safetensors.Tensor) {
	t.Helper()
	testkit.FlipBits(t, tn.File, tn.Offset+9, 1)
}

// Every fixture model repacked with coded experts gives MoE layer outputs
// bit-identical to the raw checkpoint's mapped experts through the Store at
// budgets 0, TopK + 1 slots and all experts, with and without Shapes, on 1
// and 2 read workers; bytes read are the stored (record) bytes.
func TestCodedModelLayersBitIdentical(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, raw, layers, weights, memSrc := mappedModel(t, dir)
			ck, err := safetensors.Open(repack(t, dir))
			require.NoError(t, err)
			defer ck.Close()
			shapes := modelShapes(c)
			cfg := cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK, Shapes: shapes}
			rawStore, err := cache.New(raw, cfg)
			require.NoError(t, err)
			probe, err := cache.New(ck, cfg)
			require.NoError(t, err)
			assert.Equal(t, rawStore.SlotBytes(), probe.SlotBytes(), "slots are sized as for the raw checkpoint")
			assert.Equal(t, rawStore.ExpertBytes(), probe.ExpertBytes(), "ExpertBytes is the decoded size")
			slot := probe.SlotBytes()
			require.NoError(t, probe.Close())
			require.NoError(t, rawStore.Close())

			var stored int64 // every coded expert tensor's stored bytes
			for _, tn := range ck.Tensors() {
				if strings.Contains(tn.Name, ".block_sparse_moe.experts.") {
					stored += tn.Size
				}
			}
			all := len(layers) * c.NumExperts
			r := rand.New(rand.NewPCG(9, 10))
			inputs := stepInputs(r, c.Hidden, 3, 16) // the prefill chunk waves through the small caches
			want := mappedOutputs(t, c, layers, 1, weights, memSrc, inputs)
			for _, workers := range []int{1, 2} {
				for _, slots := range []int{0, c.TopK + 1, all} {
					for _, v := range []struct{ shapes, prefetch bool }{{true, false}, {false, false}, {true, true}} {
						name := fmt.Sprintf("workers=%d/slots=%d/shapes=%v/prefetch=%v", workers, slots, v.shapes, v.prefetch)
						cc := cfg
						cc.Budget = int64(slots) * slot
						if !v.shapes {
							cc.Shapes = nil
						}
						opts := []cache.Option{cache.WithReadWorkers(workers)}
						if v.prefetch {
							opts = append(opts, cache.WithSpeculation())
						}
						s, err := cache.New(ck, cc, opts...)
						require.NoError(t, err, name)
						for i, x := range inputs {
							s.BeginStep()
							for li, l := range layers {
								if v.prefetch && li+1 < len(layers) { // background reads decode too
									s.Prefetch(layers[li+1], r.Perm(c.NumExperts)[:c.TopK])
								}
								m, err := moe.New(moeConfig(c, l, workers), weights[l], s)
								require.NoError(t, err)
								out := make([]float32, len(x))
								require.NoError(t, m.Forward(out, x, len(x)/c.Hidden), name)
								testkit.RequireSameBits(t, fmt.Sprintf("%s layer %d input %d, against the raw experts", name, l, i), out, want[[2]int{l, i}])
							}
						}
						st := s.Stats()
						require.Positive(t, st.Run.Misses, name)
						require.Positive(t, st.Run.DecodeSeconds, name)
						require.Zero(t, st.Leased, name)
						if slots == all && !v.prefetch {
							// Read each expert once more through Get: all are
							// resident now, so the run read every expert once.
							for _, l := range layers {
								for e := range c.NumExperts {
									_, release, err := s.Experts(l, []int{e}, nil)
									require.NoError(t, err)
									release()
								}
							}
							st = s.Stats()
							require.Equal(t, int64(all), st.Run.Misses, name)
							require.Equal(t, stored, st.Run.BytesRead, "%s: bytes read are the stored bytes", name)
						}
						require.NoError(t, s.Close())
					}
				}
			}
		})
	}
}

// A corrupt record fails the load with *ExpertLoadError (rans.ErrCorrupt)
// and leaves the slot EMPTY: the next request reads and fails again, and the
// other experts still load.
func TestCodedCorruptRecord(t *testing.T) {
	dir := testkit.Models(t)[0]
	c, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	bad := testkit.CopyDir(t, repack(t, dir))
	ck, err := safetensors.Open(bad)
	require.NoError(t, err)
	defer ck.Close()
	target := codedRecord(t, ck)
	flipFrequencyBit(t, target)
	layer, expert, _, ok := layout.ParseExpert(target.Name)
	require.True(t, ok, target.Name)
	probe, err := cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, Shapes: modelShapes(c)})
	require.NoError(t, err, "the header is intact: New accepts the record")
	slot := probe.SlotBytes()
	require.NoError(t, probe.Close())
	for _, slots := range []int{0, c.TopK + 1} {
		t.Run(fmt.Sprint("slots=", slots), func(t *testing.T) {
			s, err := cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK,
				Budget: int64(slots) * slot, Shapes: modelShapes(c)})
			require.NoError(t, err)
			defer s.Close()
			for try := range 2 {
				_, _, err = s.Experts(layer, []int{expert}, nil)
				var le *cache.ExpertLoadError
				require.ErrorAs(t, err, &le, "try %d", try)
				assert.Equal(t, layer, le.Layer)
				assert.Equal(t, expert, le.Expert)
				assert.ErrorIs(t, err, rans.ErrCorrupt)
				assert.Contains(t, err.Error(), "weight_packed")
				st := s.Stats()
				assert.Zero(t, st.Resident, "a failed decode publishes nothing")
				assert.Zero(t, st.Leased)
				assert.Equal(t, int64(try+1), st.Run.Failures)
			}
			other := (expert + 1) % c.NumExperts
			_, release, err := s.Experts(layer, []int{other}, nil)
			require.NoError(t, err)
			release()
		})
	}
}

// A record without its stamp is never taken for coded weights nor read as
// raw ones: New refuses it, naming the tensor.
func TestCodedUnstampedRefused(t *testing.T) {
	dir := testkit.Models(t)[0]
	c, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	bad := testkit.CopyDir(t, repack(t, dir))
	require.Positive(t, testkit.HideHeaderKey(t, bad, quant.StampKey), "no stamped shard in %s", bad)
	ck, err := safetensors.Open(bad)
	require.NoError(t, err)
	defer ck.Close()
	for _, shapes := range []*cache.Shapes{modelShapes(c), nil} {
		_, err = cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, Shapes: shapes})
		require.ErrorIs(t, err, cache.ErrExpertTensor)
		require.ErrorIs(t, err, rans.ErrUnstamped)
		assert.Regexp(t, `experts\.[0-9]+\.w[123]\.weight_packed`, err.Error())
	}
}

// A record stamped with a weight format other than MXFP4 or decoding to the
// wrong size is refused at New.
func TestCodedWrongRecordRefused(t *testing.T) {
	dir := testkit.Models(t)[0]
	c, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	ck, err := safetensors.Open(repack(t, dir))
	require.NoError(t, err)
	defer ck.Close()
	sh := modelShapes(c)
	wrong := *sh
	wrong.W1[1] += 32
	_, err = cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, Shapes: &wrong})
	require.ErrorIs(t, err, cache.ErrExpertTensor)
	assert.Contains(t, err.Error(), "record decodes to")
	assert.False(t, errors.Is(err, rans.ErrUnstamped))
}
