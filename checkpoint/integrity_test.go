package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rewriteShard rewrites one shard file in place through fn (tensors in file
// order with their bytes, and the metadata).
func rewriteShard(t testing.TB, path string, fn func(ts []safetensors.WriteTensor, meta map[string]string) map[string]string) {
	t.Helper()
	ck, err := safetensors.Open(path)
	require.NoError(t, err)
	var ts []safetensors.WriteTensor
	for _, tt := range ck.Tensors() {
		data, err := ck.Read(tt)
		require.NoError(t, err)
		ts = append(ts, safetensors.WriteTensor{Name: tt.Name, DType: tt.DType, Shape: tt.Shape, Data: data})
	}
	meta := map[string]string{}
	for _, m := range ck.Metadata() {
		for k, v := range m {
			meta[k] = v
		}
	}
	require.NoError(t, ck.Close())
	meta = fn(ts, meta)
	require.NoError(t, safetensors.WriteFile(path, ts, meta))
}

func shardPath(dir string, i int) string {
	return filepath.Join(dir, safetensors.ShardFileName(i, 3))
}

// A config with fewer layers than the checkpoint holds used to open and
// decode wrong tokens; it is refused naming the extra layer, or reported
// when the caller asks for fewer layers on purpose.
func TestExtraLayersRefused(t *testing.T) {
	dir := testkit.Synth(t, checkpoint.Synthesize, "tiny", 3)
	testkit.EditTextConfig(t, dir, func(tc map[string]any) {
		tc["num_hidden_layers"] = 12
		la := tc["linear_attn_config"].(map[string]any)
		la["full_attn_layers"] = []int{4, 8, 12}
	})
	_, err := k3.Open(dir)
	var ee *checkpoint.ExtraLayersError
	require.ErrorAs(t, err, &ee)
	assert.ErrorIs(t, err, checkpoint.ErrExtraLayers)
	assert.Equal(t, []int{12}, ee.Layers)
	assert.Equal(t, 12, ee.Declared)

	m, err := k3.Open(dir, k3.WithExtraLayers())
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, []int{12}, m.Integrity().ExtraLayers)
}

// Absurd counts over a small checkpoint are refused before the binder
// allocates per layer or per expert: the config limits catch 2^20 experts
// and 2^24 layers, CheckAgainst the largest plausible counts.
func TestAbsurdCountsOpen(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		val       int
		want      error
	}{
		{"2^20 experts", "num_experts", 1 << 20, nil},
		{"2^24 layers", "num_hidden_layers", 1 << 24, nil},
		{"MaxExperts", "num_experts", config.MaxExperts, config.ErrTooFewTensors},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testkit.Synth(t, checkpoint.Synthesize, "tiny", 4)
			testkit.EditTextConfig(t, dir, func(c map[string]any) { c[tc.key] = tc.val })
			start := time.Now()
			_, err := k3.Open(dir)
			require.Error(t, err)
			if !testkit.RaceEnabled {
				assert.Less(t, time.Since(start), 100*time.Millisecond)
			}
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			} else {
				var ce *config.ConfigError
				assert.ErrorAs(t, err, &ce)
			}
		})
	}
}

// The acceptance bound at the library's entry point, measured on a fresh
// process: Open of each absurd config is refused under 100 ms and 50 MB of
// peak RSS.
func TestAbsurdCountsOpenRSS(t *testing.T) {
	if dir, ok := testkit.ChildArg("K3_OPEN_CHILD"); ok {
		start := time.Now()
		_, err := k3.Open(dir)
		fmt.Printf("REFUSED %v %v %d\n", time.Since(start).Seconds(), err != nil, testkit.PeakRSS())
		if err == nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	if testkit.RaceEnabled {
		t.Skip("the race runtime's own memory and speed are not the figures measured")
	}
	for _, tc := range []struct {
		key string
		val int
	}{{"num_experts", 1 << 20}, {"num_hidden_layers", 1 << 24}, {"num_experts", config.MaxExperts}, {"num_hidden_layers", config.MaxLayers}} {
		t.Run(fmt.Sprintf("%s=%d", tc.key, tc.val), func(t *testing.T) {
			dir := testkit.Synth(t, checkpoint.Synthesize, "tiny", 5)
			testkit.EditTextConfig(t, dir, func(c map[string]any) { c[tc.key] = tc.val })
			out := testkit.RunChild(t, "TestAbsurdCountsOpenRSS", "K3_OPEN_CHILD", dir)
			var sec float64
			var refused bool
			var rss int64
			_, err := fmt.Sscanf(testkit.ChildLine(t, out, "REFUSED"), "REFUSED %g %t %d", &sec, &refused, &rss)
			require.NoError(t, err)
			if rss < 0 {
				t.Skip("no /proc/self/status on this system")
			}
			t.Logf("refused in %.1f ms, child peak RSS %.1f MB", sec*1e3, float64(rss)/1e6)
			assert.Less(t, sec, 0.1)
			assert.Less(t, rss, int64(50e6))
		})
	}
}

// All six bad-stamp kinds of §6.8 are refused by Open (they used to
// open without a word); a correct stamp is accepted and counted.
func TestStampsOnModelPath(t *testing.T) {
	const embed = "language_model.model.embed_tokens.weight"
	find := func(t *testing.T, dir string) (int, string) {
		for i := 1; i <= 3; i++ {
			ck, err := safetensors.Open(shardPath(dir, i))
			require.NoError(t, err)
			tt, ok := ck.Tensor(embed)
			ck.Close()
			if ok {
				return i, strings.ToLower(tt.DType.String())
			}
		}
		require.FailNow(t, "no embedding")
		return 0, ""
	}
	many := func() string {
		m := map[string]string{}
		for i := range quant.MaxStampEntries + 1 {
			m[fmt.Sprintf("t%05d", i)] = "bf16"
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, tc := range []struct {
		name  string
		stamp func(dtype string) string
		other string // stamp for another shard ("" = none)
		ok    bool
	}{
		{"correct", func(d string) string { return `{"` + embed + `":"` + d + `"}` }, "", true},
		{"not an object", func(string) string { return `["bf16"]` }, "", false},
		{"non-string entry", func(string) string { return `{"` + embed + `":16}` }, "", false},
		{"too many entries", func(string) string { return many() }, "", false},
		{"conflicting shards", func(d string) string { return `{"` + embed + `":"` + d + `"}` }, `{"` + embed + `":"f32"}`, false},
		{"unknown format", func(string) string { return `{"` + embed + `":"bf17"}` }, "", false},
		{"mismatching format", func(d string) string {
			if d == "bf16" {
				return `{"` + embed + `":"f16"}`
			}
			return `{"` + embed + `":"bf16"}`
		}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testkit.Synth(t, checkpoint.Synthesize, "tiny", 6)
			i, dtype := find(t, dir)
			rewriteShard(t, shardPath(dir, i), func(_ []safetensors.WriteTensor, meta map[string]string) map[string]string {
				meta[quant.StampKey] = tc.stamp(dtype)
				return meta
			})
			if tc.other != "" {
				j := i%3 + 1
				rewriteShard(t, shardPath(dir, j), func(_ []safetensors.WriteTensor, meta map[string]string) map[string]string {
					meta[quant.StampKey] = tc.other
					return meta
				})
			}
			m, err := k3.Open(dir)
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, 1, m.Integrity().StampedTensors)
				m.Close()
				return
			}
			require.ErrorIs(t, err, quant.ErrStamp)
		})
	}
}

// A BF16 matrix relabelled F16 (or an F16 matrix labelled BF16) is refused;
// the same values honestly converted to F16 are accepted.
func TestRelabelledDType(t *testing.T) {
	const name = "language_model.model.layers.1.self_attn.q_proj.weight"
	for _, tc := range []struct {
		name string
		edit func(tt *safetensors.WriteTensor)
		ok   bool
	}{
		{"BF16 labelled F16", func(tt *safetensors.WriteTensor) { tt.DType = safetensors.F16 }, false},
		{"F16 labelled BF16", func(tt *safetensors.WriteTensor) { toF16(tt.Data) }, false},
		{"honest F16", func(tt *safetensors.WriteTensor) { toF16(tt.Data); tt.DType = safetensors.F16 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testkit.Synth(t, checkpoint.Synthesize, "tiny", 7)
			found := false
			for i := 1; i <= 3 && !found; i++ {
				ck, err := safetensors.Open(shardPath(dir, i))
				require.NoError(t, err)
				tt, ok := ck.Tensor(name)
				ck.Close()
				if !ok {
					continue
				}
				require.Equal(t, safetensors.BF16, tt.DType)
				found = true
				rewriteShard(t, shardPath(dir, i), func(ts []safetensors.WriteTensor, meta map[string]string) map[string]string {
					for k := range ts {
						if ts[k].Name == name {
							tc.edit(&ts[k])
						}
					}
					return meta
				})
			}
			require.True(t, found)
			m, err := k3.Open(dir)
			if tc.ok {
				require.NoError(t, err)
				m.Close()
				return
			}
			require.ErrorIs(t, err, checkpoint.ErrRelabelled)
			assert.Contains(t, err.Error(), name)
		})
	}
}

// toF16 converts BF16 values in place to the nearest F16 (quant.F32ToF16:
// round to nearest even).
func toF16(b []byte) {
	for i := 0; i+1 < len(b); i += 2 {
		f := math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[i:])) << 16)
		binary.LittleEndian.PutUint16(b[i:], quant.F32ToF16(f))
	}
}

// addChecksums rewrites every shard of dir with colibri.sha256 digests of
// its tensors.
func addChecksums(t testing.TB, dir string, shards int) {
	for i := 1; i <= shards; i++ {
		p := filepath.Join(dir, safetensors.ShardFileName(i, shards))
		rewriteShard(t, p, func(ts []safetensors.WriteTensor, meta map[string]string) map[string]string {
			sums, err := safetensors.ChecksumMetadata(ts)
			require.NoError(t, err)
			meta[safetensors.ChecksumKey] = sums
			return meta
		})
	}
}

// Acceptance: with verification on, a flipped bit in ANY tensor of the
// models/tiny fixture is detected (one tensor at a time, the bit in the
// middle of its data) and the error names the tensor; without it the same
// model opens.
func TestVerifyDetectsEveryFlippedBit(t *testing.T) {
	src := testkit.Path(t, "models/tiny")
	dir := testkit.CopyDir(t, src)
	addChecksums(t, dir, 3)
	m, err := k3.Open(dir, k3.WithVerify())
	require.NoError(t, err)
	rep := m.Integrity()
	m.Close()
	assert.Zero(t, rep.UncheckedTensors)
	t.Logf("verified %d tensors, %d bytes in %.1f ms", rep.VerifiedTensors, rep.VerifiedBytes, rep.VerifySeconds*1e3)

	ck, err := safetensors.Open(dir)
	require.NoError(t, err)
	tensors := ck.Tensors()
	ck.Close()
	require.Equal(t, rep.VerifiedTensors, len(tensors))
	for _, tt := range tensors {
		if tt.Size == 0 {
			continue
		}
		at := tt.Offset + tt.Size/2
		testkit.FlipBits(t, tt.File, at, 0x10)
		_, err := k3.Open(dir, k3.WithVerify())
		testkit.FlipBits(t, tt.File, at, 0x10)
		if !assert.ErrorIs(t, err, safetensors.ErrChecksum, tt.Name) {
			continue
		}
		assert.Contains(t, err.Error(), `"`+tt.Name+`"`)
	}
	// Restored: opens again.
	m, err = k3.Open(dir, k3.WithVerify())
	require.NoError(t, err)
	m.Close()
}

// Check on its own: a clean checkpoint passes, counts what a shorter run
// leaves unbound, and reports (instead of refusing) layers beyond the
// config only when asked.
func TestCheckReport(t *testing.T) {
	dir := testkit.Synth(t, checkpoint.Synthesize, "tiny", 4)
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	ck, err := safetensors.Open(dir)
	require.NoError(t, err)
	defer ck.Close()
	beyond := func(n int) int {
		k := 0
		for _, tt := range ck.Tensors() {
			var l int
			if _, err := fmt.Sscanf(tt.Name, "language_model.model.layers.%d.", &l); err == nil && l >= n {
				k++
			}
		}
		return k
	}
	rep, err := checkpoint.Check(dir, ck, cfg, checkpoint.CheckOptions{Layers: 2})
	require.NoError(t, err)
	assert.Empty(t, rep.ExtraLayers)
	assert.Positive(t, rep.SkippedTensors)
	assert.Equal(t, beyond(2), rep.SkippedTensors)

	short := *cfg
	short.NumLayers = cfg.NumLayers - 1
	_, err = checkpoint.Check(dir, ck, &short, checkpoint.CheckOptions{})
	var ee *checkpoint.ExtraLayersError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, []int{cfg.NumLayers - 1}, ee.Layers)
	assert.Equal(t, beyond(cfg.NumLayers-1), ee.Tensors)
	rep, err = checkpoint.Check(dir, ck, &short, checkpoint.CheckOptions{ExtraLayers: true})
	require.NoError(t, err)
	assert.Equal(t, []int{cfg.NumLayers - 1}, rep.ExtraLayers)
}

func TestManifest(t *testing.T) {
	dir := testkit.Synth(t, checkpoint.Synthesize, "tiny", 8)
	var buf bytes.Buffer
	var calls int
	require.NoError(t, checkpoint.WriteManifest(dir, &buf, func(string, int64, int64) { calls++ }))
	assert.Positive(t, calls)
	m, err := checkpoint.ReadManifest(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Len(t, m.Files, 7) // config, index, the synthesized tokenizer's two files, three shards
	assert.Equal(t, "config.json", m.Files[0].Name)
	assert.Contains(t, buf.String(), "  model-00001-of-00003.safetensors\n") // sha256sum format
	assert.Equal(t, buf.Bytes(), m.Marshal())
	// Tokenizer files are covered: a changed one is named, and so is a missing one.
	tok := filepath.Join(dir, "tiktoken.model")
	orig, err := os.ReadFile(tok)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tok, []byte("x"), 0o644))
	assert.ErrorContains(t, checkpoint.VerifyManifest(dir, m, nil), "tiktoken.model: changed: sha256")
	require.NoError(t, os.Remove(tok))
	assert.ErrorContains(t, checkpoint.VerifyManifest(dir, m, nil), "tiktoken.model: listed in the manifest but not part of the checkpoint")
	require.NoError(t, os.WriteFile(tok, orig, 0o644))
	require.NoError(t, checkpoint.VerifyManifest(dir, m, nil))

	// A changed byte and a truncated shard are both named.
	s1, s3 := shardPath(dir, 1), shardPath(dir, 3)
	st1, err := os.Stat(s1)
	require.NoError(t, err)
	testkit.FlipBits(t, s1, st1.Size()-100, 0x10) // in tensor data: only the digest can tell
	st, err := os.Stat(s3)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(s3, st.Size()-1))
	err = checkpoint.VerifyManifest(dir, m, nil)
	var me *checkpoint.ManifestError
	require.ErrorAs(t, err, &me)
	assert.ErrorIs(t, err, checkpoint.ErrManifestMismatch)
	require.Len(t, me.Problems, 2)
	assert.Contains(t, err.Error(), filepath.Base(s1)+": changed: sha256")
	assert.Contains(t, err.Error(), filepath.Base(s3)+": safetensors:") // named by the structure check, not hashed

	z := strings.Repeat("0", 64)
	for _, bad := range []string{``, z + "  ../x\n", z + " x\n", strings.Repeat("0", 63) + "   x\n", strings.ToUpper(strings.Repeat("a", 64)) + "  x\n",
		z + "  a\n" + z + "  a\n", "junk\n"} {
		_, err := checkpoint.ReadManifest(strings.NewReader(bad))
		assert.ErrorIs(t, err, checkpoint.ErrManifest, bad)
	}
}

// FuzzReadManifest: the --manifest reader never panics; what it accepts holds only lower-case hex
// digests and plain file names, each once, and survives a round trip through Marshal.
// testdata/fuzz/FuzzReadManifest holds the shapes of the refusals as seeds.
func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 32) + "  config.json\n"))
	f.Add([]byte(strings.Repeat("ab", 32) + " *a\n" + strings.Repeat("cd", 32) + "  b"))
	f.Add([]byte("\n"))
	digest := regexp.MustCompile("^[0-9a-f]{64}$")
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := checkpoint.ReadManifest(bytes.NewReader(data))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, f := range m.Files { // what the reader promises: hex digests, plain names, each once
			require.True(t, digest.MatchString(f.SHA256), "%q", f.SHA256)
			require.True(t, f.Name != "" && f.Name != "." && f.Name != ".." && !strings.ContainsAny(f.Name, "/\\\r\n") && !seen[f.Name], "%q", f.Name)
			seen[f.Name] = true
		}
		back, err := checkpoint.ReadManifest(bytes.NewReader(m.Marshal()))
		require.NoError(t, err, "round trip")
		require.Equal(t, m.Files, back.Files, "round trip")
	})
}

// TestPerfGeometryBinds writes the perf geometry's layout with sparse data and binds it, so the
// benchmark geometry is checked without generating its 1.6 GB.
func TestPerfGeometryBinds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "perf")
	if err := checkpoint.SynthesizeLayout(dir, "perf", 1); err != nil {
		t.Fatal(err)
	}
	m, err := k3.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in := m.Info()
	c := m.Config()
	if want := int64((c.NumLayers - c.FirstDense) * c.NumExperts * 3 * c.MoEInter * c.Latent); in.Experts.Params != want {
		t.Errorf("expert parameters %d, want %d", in.Experts.Params, want)
	}
	if want := int64(len(c.FullAttn) * (c.KVLoRA + c.QKRope) * 4); m.Plan().MLABytesPerPosition != want {
		t.Errorf("MLA bytes per position %d, want %d", m.Plan().MLABytesPerPosition, want)
	}
	t.Logf("perf: %d parameters, %d bytes (%d trunk, %d experts)", in.Params, in.Bytes, in.Trunk.Bytes, in.Experts.Bytes)
}
