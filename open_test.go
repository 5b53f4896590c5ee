package k3_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/safetensors"
)

// bindError opens the tiny geometry with one text_config field changed to val and returns
// the *BindError Open must fail with, and the error itself.
func bindError(t *testing.T, key string, val any) (*k3.BindError, error) {
	t.Helper()
	dir := synthTiny(t, 1)
	testkit.EditTextConfig(t, dir, func(tc map[string]any) { tc[key] = val })
	_, err := k3.Open(dir)
	be, ok := errors.AsType[*k3.BindError](err)
	require.True(t, ok, "Open: %v, want *BindError", err)
	return be, err
}

// TestBindMismatch: a config whose dense width disagrees with the checkpoint names exactly the
// three dense matrices, in one error.
func TestBindMismatch(t *testing.T) {
	be, err := bindError(t, "intermediate_size", 64)
	require.Empty(t, be.Missing)
	require.Len(t, be.Mismatched, 3, "want the 3 dense matrices")
	for _, n := range []string{"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} {
		found := false
		for _, m := range be.Mismatched {
			found = found || strings.Contains(m, "layers.0."+n+".weight")
		}
		assert.True(t, found, "%s not reported in %v", n, be.Mismatched)
	}
	t.Log(err)
}

// TestBindExpertGeometry: an MXFP4 width the experts do not have is refused per expert matrix
// with the geometry problem spelled out.
func TestBindExpertGeometry(t *testing.T) {
	be, _ := bindError(t, "moe_intermediate_size", 32)
	// 12 MoE layers × 8 experts × 3 matrices, plus 3 shared-expert matrices per MoE layer.
	experts, shared := 0, 0
	for _, m := range be.Mismatched {
		switch {
		case strings.Contains(m, ".experts.") && strings.Contains(m, "weight_{packed,scale}"):
			experts++
		case strings.Contains(m, "shared_experts."):
			shared++
		}
	}
	t.Log(be.Mismatched[len(be.Mismatched)-1])
	assert.Equal(t, 12*8*3, experts, "expert mismatches")
	assert.Equal(t, 12*3, shared, "shared-expert mismatches")
	assert.Len(t, be.Mismatched, experts+shared)
}

// TestBindMissingShard: removing a shard makes every tensor it held missing, each naming the
// shard the index says should hold it, in one error.
func TestBindMissingShard(t *testing.T) {
	dir := synthTiny(t, 1)
	idx := testkit.ReadJSON[struct {
		WeightMap map[string]string `json:"weight_map"`
	}](t, filepath.Join(dir, "model.safetensors.index.json"))
	const gone = "model-00002-of-00003.safetensors"
	want := 0
	for _, s := range idx.WeightMap {
		if s == gone {
			want++
		}
	}
	require.Positive(t, want)
	require.NoError(t, os.Remove(filepath.Join(dir, gone)))
	_, err := k3.Open(dir)
	be, ok := errors.AsType[*k3.BindError](err)
	require.True(t, ok, "Open: %v, want *BindError", err)
	for _, m := range be.Missing {
		assert.Equal(t, gone, m.Shard, "missing entry %s does not name the shard", m.Name)
		assert.Equal(t, safetensors.ShardAbsent, m.State, m.Name)
	}
	assert.Len(t, be.Missing, want, "the shard held %d tensors", want)
	// One line for the shard, not one per tensor.
	msg := err.Error()
	assert.Equal(t, 1, strings.Count(msg, "\n"), "the missing shard is not one line:\n%s", msg)
	assert.Contains(t, msg, strconv.Itoa(want)+" tensors the index places in shard "+gone)
}

// TestOpenErrors: no config, bad options.
func TestOpenErrors(t *testing.T) {
	_, err := k3.Open(t.TempDir())
	assert.Error(t, err, "opened a directory without config.json")
	_, err = k3.Open(synthTiny(t, 1), k3.WithThreads(0))
	assert.Error(t, err, "WithThreads(0) accepted")
	bad := synthTiny(t, 1)
	testkit.EditTextConfig(t, bad, func(tc map[string]any) { tc["num_experts_per_token"] = 100 })
	_, err = k3.Open(bad)
	var ce *config.ConfigError
	assert.ErrorAs(t, err, &ce, "top-k 100 of 8 experts")
	assert.ErrorIs(t, checkpoint.Synthesize(t.TempDir(), "enormous", 1), checkpoint.ErrUnknownGeometry)
}

// TestSynthDecodes: a synthetic tiny model decodes, full recompute equals incremental, and its
// greedy continuation is not degenerate (more than one distinct token).
func TestSynthDecodes(t *testing.T) {
	m := openModel(t, synthTiny(t, 5))
	prompt := []int{1, 2, 3, 4, 5}
	a, la := greedy(t, m, prompt, 12, true)
	b, lb := greedy(t, m, prompt, 12, false)
	distinct := map[int]bool{}
	for i := range a {
		distinct[a[i]] = true
		require.Equal(t, a[i], b[i], "step %d: full recompute and incremental picks", i)
		require.True(t, testkit.SameBits(la[i], lb[i]), "step %d: full recompute and incremental logits", i)
	}
	assert.GreaterOrEqual(t, len(distinct), 3, "greedy continuation %v is degenerate", a)
	info := m.Info()
	assert.Equal(t, 12*8*6, info.Experts.Tensors)
	assert.Equal(t, info.EmbedHead.Params+info.Trunk.Params+info.Experts.Params, info.Params)
	t.Logf("synthetic tiny: %v; info %+v", a, info)
}

// TestK3SparseBind opens the full-size k3 geometry (sparse shards) and checks the bound sizes
// against §3.5: this is the real model's binding, short of its data.
func TestK3SparseBind(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 sparse shards and binds 497,052 tensors")
	}
	start := time.Now()
	dir := testkit.Synth(t, checkpoint.Synthesize, "k3", 1)
	synth := time.Since(start)
	start = time.Now()
	m := openModel(t, dir, k3.WithThreads(2))
	open := time.Since(start)
	info, plan := m.Info(), m.Plan()
	t.Logf("k3 sparse: synthesized in %v, opened and bound in %v", synth, open)
	t.Logf("k3 sparse: info %+v", info)
	t.Logf("k3: MLA latent cache %d bytes per position; KDA state %d bytes per session", plan.MLABytesPerPosition, plan.KDAStateBytes)
	checks := []struct {
		what      string
		got, want int64
	}{
		{"MLA cache bytes per position (24 × (512+64) × 4)", plan.MLABytesPerPosition, 55_296},
		{"KDA state bytes (69 × 6,733,824)", plan.KDAStateBytes, 69 * 6_733_824},
		{"trunk bytes", info.Trunk.Bytes, 108_811_877_376},
		{"routed expert bytes", info.Experts.Bytes, 1_446_456_066_048},
		{"embed+head bytes (+ 3 BF16 vectors)", info.EmbedHead.Bytes, 4_697_620_480 + 3*7168*2},
		// §3.5: resident set (trunk + embed + lm_head + final vectors) 56,743,648,000 params.
		{"resident parameters", info.Trunk.Params + info.EmbedHead.Params, 56_743_648_000},
		{"routed expert parameters (82,432 × 33,030,144 / 3 × 3)", info.Experts.Params, 82_432 * 3 * 3072 * 3584},
	}
	for _, c := range checks {
		assert.Equal(t, c.want, c.got, c.what)
	}
	s := m.NewSession()
	assert.Zero(t, s.Len(), "fresh session not empty")
	assert.Zero(t, k3.MLACacheBytes(s), "fresh session not empty")
	assert.Error(t, s.Prefill(context.Background(), []int{163840}), "id = vocab accepted")
}

// TestStrayShardWarning: a *.safetensors file the index does not name is ignored with a warning.
func TestStrayShardWarning(t *testing.T) {
	dir := synthTiny(t, 1)
	b, err := os.ReadFile(filepath.Join(dir, "model-00001-of-00003.safetensors"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stray.safetensors"), b, 0o644))
	m := openModel(t, dir)
	w := m.Warnings()
	assert.Contains(t, strings.Join(w, "\n"), "stray.safetensors", "warnings %q do not name the stray shard", w)
}

// TestWithLayers: a prefix of the layers runs, says so, and differs from the full model; the
// full count is the full model.
func TestWithLayers(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	full := openModel(t, dir)
	want, err := full.Forward(context.Background(), ref.FullIDs)
	require.NoError(t, err)
	n := full.Config().NumLayers
	same := openModel(t, dir, k3.WithLayers(n))
	got, err := same.Forward(context.Background(), ref.FullIDs)
	require.NoError(t, err)
	assert.Equal(t, testkit.Digest(want...), testkit.Digest(got...))

	part := openModel(t, dir, k3.WithLayers(3), k3.WithTrunkBudget(1<<30))
	assert.Equal(t, 3, part.Layers())
	assert.Equal(t, n, part.Config().NumLayers)
	assert.Len(t, part.Plan().Trunk.Pinned, 3)
	w := strings.Join(part.Warnings(), "\n")
	assert.Contains(t, w, "running 3 of")
	p, err := part.Forward(context.Background(), ref.FullIDs)
	require.NoError(t, err)
	assert.NotEqual(t, testkit.Digest(want...), testkit.Digest(p...))

	_, err = k3.Open(dir, k3.WithLayers(n+1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the configuration has")
}

func TestWithConfigFile(t *testing.T) {
	dir := testkit.Models(t)[0]
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	alt := filepath.Join(t.TempDir(), "other.json")
	require.NoError(t, os.WriteFile(alt, b, 0o644))
	m := openModel(t, dir, k3.WithConfigFile(alt))
	assert.Equal(t, testkit.LoadReference(t, dir).Vocab, m.Config().Vocab)
	_, err = k3.Open(dir, k3.WithConfigFile(filepath.Join(t.TempDir(), "missing.json")))
	require.Error(t, err)
}
