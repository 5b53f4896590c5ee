package k3_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
)

func synthTiny(t testing.TB, seed int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := checkpoint.Synthesize(dir, "tiny", seed); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editConfig rewrites one text_config field of a synthetic (nested) config.json.
func editConfig(t *testing.T, dir, key string, val any) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	tc, ok := root["text_config"].(map[string]any)
	if !ok {
		t.Fatal("synthetic config is not nested")
	}
	tc[key] = val
	if b, err = json.Marshal(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBindMismatch: a config whose dense width disagrees with the checkpoint names exactly the
// three dense matrices, in one error.
func TestBindMismatch(t *testing.T) {
	dir := synthTiny(t, 1)
	editConfig(t, dir, "intermediate_size", 64)
	_, err := k3.Open(dir)
	var be *k3.BindError
	if !errors.As(err, &be) {
		t.Fatalf("Open: %v, want *BindError", err)
	}
	if len(be.Missing) != 0 || len(be.Mismatched) != 3 {
		t.Fatalf("missing %v, mismatched %v; want the 3 dense matrices", be.Missing, be.Mismatched)
	}
	for i, n := range []string{"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} {
		found := false
		for _, m := range be.Mismatched {
			found = found || strings.Contains(m, "layers.0."+n+".weight")
		}
		if !found {
			t.Errorf("%d: %s not reported in %v", i, n, be.Mismatched)
		}
	}
	t.Log(err)
}

// TestBindExpertGeometry: an MXFP4 width the experts do not have is refused per expert matrix
// with the geometry problem spelled out.
func TestBindExpertGeometry(t *testing.T) {
	dir := synthTiny(t, 1)
	editConfig(t, dir, "moe_intermediate_size", 32)
	_, err := k3.Open(dir)
	var be *k3.BindError
	if !errors.As(err, &be) {
		t.Fatalf("Open: %v, want *BindError", err)
	}
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
	if experts != 12*8*3 || shared != 12*3 || len(be.Mismatched) != experts+shared {
		t.Errorf("%d expert and %d shared mismatches of %d, want 288 and 36", experts, shared, len(be.Mismatched))
	}
}

// TestBindMissingShard: removing a shard makes every tensor it held missing, each named with the
// shard the index says should hold it, in one error.
func TestBindMissingShard(t *testing.T) {
	dir := synthTiny(t, 1)
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	const gone = "model-00002-of-00003.safetensors"
	want := 0
	for _, s := range idx.WeightMap {
		if s == gone {
			want++
		}
	}
	if err := os.Remove(filepath.Join(dir, gone)); err != nil {
		t.Fatal(err)
	}
	_, err = k3.Open(dir)
	var be *k3.BindError
	if !errors.As(err, &be) {
		t.Fatalf("Open: %v, want *BindError", err)
	}
	for _, m := range be.Missing {
		if !strings.Contains(m, gone) {
			t.Errorf("missing entry does not name the shard: %s", m)
		}
	}
	if len(be.Missing) != want || want == 0 {
		t.Errorf("%d missing, the shard held %d", len(be.Missing), want)
	}
	// One line for the shard, not one per tensor.
	if msg := err.Error(); strings.Count(msg, "\n") != 1 || !strings.Contains(msg, strconv.Itoa(want)+" tensors the index places in shard "+gone) {
		t.Errorf("the missing shard is not one line:\n%s", msg)
	}
}

// TestOpenErrors: no config, bad options.
func TestOpenErrors(t *testing.T) {
	if _, err := k3.Open(t.TempDir()); err == nil {
		t.Error("opened a directory without config.json")
	}
	if _, err := k3.Open(synthTiny(t, 1), k3.WithThreads(0)); err == nil {
		t.Error("WithThreads(0) accepted")
	}
	bad := synthTiny(t, 1)
	editConfig(t, bad, "num_experts_per_token", 100)
	var ce *config.ConfigError
	if _, err := k3.Open(bad); !errors.As(err, &ce) {
		t.Errorf("top-k 100 of 8 experts: %v, want *config.ConfigError", err)
	}
	if err := checkpoint.Synthesize(t.TempDir(), "enormous", 1); !errors.Is(err, checkpoint.ErrUnknownGeometry) {
		t.Errorf("unknown geometry: %v", err)
	}
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
		if a[i] != b[i] || !sameBits(la[i], lb[i]) {
			t.Fatalf("step %d: full recompute %d, incremental %d (logits equal: %v)", i, a[i], b[i], sameBits(la[i], lb[i]))
		}
	}
	if len(distinct) < 3 {
		t.Errorf("greedy continuation %v is degenerate", a)
	}
	info := m.Info()
	if info.Experts.Tensors != 12*8*6 || info.Params != info.EmbedHead.Params+info.Trunk.Params+info.Experts.Params {
		t.Errorf("info %+v", info)
	}
	t.Logf("synthetic tiny: %v; info %+v", a, info)
}

// TestK3SparseBind opens the full-size k3 geometry (sparse shards) and checks the bound sizes
// against SPEC §3.5: this is the real model's binding, short of its data.
func TestK3SparseBind(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 sparse shards and binds 497,052 tensors")
	}
	dir := filepath.Join(t.TempDir(), "k3")
	start := time.Now()
	if err := checkpoint.Synthesize(dir, "k3", 1); err != nil {
		t.Fatal(err)
	}
	synth := time.Since(start)
	start = time.Now()
	m := openModel(t, dir, k3.WithThreads(2))
	open := time.Since(start)
	info := m.Info()
	t.Logf("k3 sparse: synthesized in %v, opened and bound in %v", synth, open)
	t.Logf("k3 sparse: info %+v", info)
	t.Logf("k3: MLA latent cache %d bytes per position; KDA state %d bytes per session", info.MLACacheBytesPerPosition, info.KDAStateBytes)
	checks := []struct {
		what      string
		got, want int64
	}{
		{"MLA cache bytes per position (24 × (512+64) × 4)", info.MLACacheBytesPerPosition, 55_296},
		{"KDA state bytes (69 × 6,733,824)", info.KDAStateBytes, 69 * 6_733_824},
		{"trunk bytes", info.Trunk.Bytes, 108_811_877_376},
		{"routed expert bytes", info.Experts.Bytes, 1_446_456_066_048},
		{"embed+head bytes (+ 3 BF16 vectors)", info.EmbedHead.Bytes, 4_697_620_480 + 3*7168*2},
		// SPEC §3.5: resident set (trunk + embed + lm_head + final vectors) 56,743,648,000 params.
		{"resident parameters", info.Trunk.Params + info.EmbedHead.Params, 56_743_648_000},
		{"routed expert parameters (82,432 × 33,030,144 / 3 × 3)", info.Experts.Params, 82_432 * 3 * 3072 * 3584},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
	s := m.NewSession()
	if s.Len() != 0 || s.MLACacheBytes() != 0 {
		t.Error("fresh session not empty")
	}
	if err := s.Prefill(context.Background(), []int{163840}); err == nil {
		t.Error("id = vocab accepted")
	}
}

// TestStrayShardWarning: a *.safetensors file the index does not name is ignored with a warning.
func TestStrayShardWarning(t *testing.T) {
	dir := synthTiny(t, 1)
	b, err := os.ReadFile(filepath.Join(dir, "model-00001-of-00003.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stray.safetensors"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	m := openModel(t, dir)
	if w := m.Warnings(); len(w) == 0 || !strings.Contains(strings.Join(w, "\n"), "stray.safetensors") {
		t.Errorf("warnings %q do not name the stray shard", w)
	}
}
