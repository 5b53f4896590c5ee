package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/trunk"
)

// TestPackTrunkLossless12: pack-trunk --format lossless12 writes a smaller trunk.bin whose
// trunk.json names the format, and run --trunk on it reproduces the reference's full_ids at the
// floor and all pinned; an unknown format is a usage error.
func TestPackTrunkLossless12(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	bf, l12 := t.TempDir(), t.TempDir()
	code, _, stderr := runCLI(t, "pack-trunk", dir, bf)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runCLI(t, "pack-trunk", dir, l12, "--format", "lossless12")
	require.Equal(t, exitOK, code, stderr)
	js, err := os.ReadFile(filepath.Join(l12, "trunk.json"))
	require.NoError(t, err)
	assert.Contains(t, string(js), `"format":"lossless12"`)
	sb, err := os.Stat(filepath.Join(bf, "trunk.bin"))
	require.NoError(t, err)
	sl, err := os.Stat(filepath.Join(l12, "trunk.bin"))
	require.NoError(t, err)
	// The lossless12 pack holds the embedding and the head too, which a bf16 pack leaves to the
	// shards.
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	assert.Contains(t, string(js), `"head":{`)
	assert.Less(t, sl.Size(), (sb.Size()+2*int64(cfg.Vocab)*int64(cfg.Hidden)*2)*4/5)
	for _, extra := range [][]string{{"--trunk-gb", "0.0002"}, {}} {
		out := filepath.Join(t.TempDir(), "r.json")
		args := append([]string{"run", dir, "--ids", joinIDs(ref.PromptIDs), "--gen", itoa(len(ref.FullIDs) - len(ref.PromptIDs)),
			"--incremental", "--no-stop", "--out", out, "--trunk", l12}, extra...)
		code, _, stderr := runCLI(t, args...)
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, ref.FullIDs, ints(t, readReport(t, out)["full_ids"]), "%v", extra)
	}
	code, _, stderr = runCLI(t, "pack-trunk", dir, t.TempDir(), "--format", "zstd")
	assert.Equal(t, exitUsage, code)
	assert.True(t, strings.Contains(stderr, "--format") && strings.Contains(stderr, `"zstd"`), stderr)
}

// TestVerifyTrunk: verify --trunk passes a bf16 and a lossless12 pack, layer by layer; a byte
// flipped in trunk.bin fails its layer's sha256, and a malformed lossless12 block whose layer
// checksum was rewritten to match is refused by layer, tensor, row and block; both exit 1.
func TestVerifyTrunk(t *testing.T) {
	dir := testkit.Models(t)[0]
	for _, format := range []string{"bf16", "lossless12"} {
		td := t.TempDir()
		r := execK3(t, "", "", "pack-trunk", dir, td, "--format", format)
		require.Equal(t, exitOK, r.code, r.stderr)
		r = execK3(t, "", "", "verify", dir, "--trunk", td)
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stderr, "layer 0: ok", format)
		assert.Contains(t, r.stderr, td+": ", format)
		assert.NotContains(t, r.stderr, "problem", format)
		assert.Contains(t, r.stderr, "layer(s)", format)
		assert.Equal(t, format == "lossless12", strings.Contains(r.stderr, "embedding: ok"), format)
		assert.Contains(t, r.stderr, ": ok\n", format)
	}

	td := t.TempDir()
	r := execK3(t, "", "", "pack-trunk", dir, td, "--format", "lossless12")
	require.Equal(t, exitOK, r.code, r.stderr)
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	l, err := trunk.ReadLayout(td, cfg.NumLayers, trunk.Expect{})
	require.NoError(t, err)
	var run trunk.LayerRun
	var tensor trunk.RunTensor
	for _, r := range l.Layers {
		for _, rt := range r.Tensors {
			if rt.Format == trunk.FormatLossless12 && tensor.Name == "" {
				run, tensor = r, rt
			}
		}
	}
	require.NotEmpty(t, tensor.Name)
	bin := filepath.Join(td, trunk.BinName)
	orig, err := os.ReadFile(bin)
	require.NoError(t, err)
	js, err := os.ReadFile(filepath.Join(td, trunk.LayoutName))
	require.NoError(t, err)

	// A flipped bit: the layer's sha256.
	b := append([]byte(nil), orig...)
	b[run.FileOff+tensor.Off+tensor.NBytes/2] ^= 0x10
	require.NoError(t, os.WriteFile(bin, b, 0o644))
	r = execK3(t, "", "", "verify", dir, "--trunk", td)
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, "checksum", r.stderr)
	assert.Contains(t, r.stderr, "layer "+itoa(run.Layer)+" of", r.stderr)
	assert.Contains(t, r.stderr, "problem(s)", r.stderr)

	// A malformed block (row 0's first window base above the largest allowed) under a
	// rewritten checksum: the block is refused by name.
	b = append([]byte(nil), orig...)
	b[run.FileOff+tensor.Off+lossless12.HeaderSize] = 0xff
	old := sha256.Sum256(orig[run.FileOff : run.FileOff+run.Unpadded])
	now := sha256.Sum256(b[run.FileOff : run.FileOff+run.Unpadded])
	require.Contains(t, string(js), hex.EncodeToString(old[:]))
	require.NoError(t, os.WriteFile(bin, b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(td, trunk.LayoutName),
		[]byte(strings.Replace(string(js), hex.EncodeToString(old[:]), hex.EncodeToString(now[:]), 1)), 0o644))
	r = execK3(t, "", "", "verify", dir, "--trunk", td)
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, "layer "+itoa(run.Layer)+": "+tensor.Name+": lossless12: malformed row 0 block 0", r.stderr)
	assert.NotContains(t, r.stderr, "layer "+itoa(run.Layer)+": ok", r.stderr)
	assert.Equal(t, len(l.Runs())-1, strings.Count(r.stderr, ": ok: "), "the other runs pass: %s", r.stderr)
	assert.Contains(t, r.stderr, "lm_head: ok: 1 tensors (1 lossless12", "the head's run verified")
}

// TestInfoTrunkStats: info --trunk-stats prints a line per matrix checkpoint.MeasureLossless12
// measures, in its order with its figures, and a total line with the library's sums, on every
// fixture model; a directory without a checkpoint fails with exit 1.
func TestInfoTrunkStats(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		stats, err := checkpoint.MeasureLossless12(dir)
		require.NoError(t, err)
		require.NotEmpty(t, stats)
		r := execK3(t, "", "", "info", dir, "--trunk-stats")
		require.Equal(t, exitOK, r.code, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		require.Len(t, lines, len(stats)+2, r.stdout)
		assert.True(t, strings.HasPrefix(lines[0], "tensor "), lines[0])
		var bytes, bf16, escapes, weights int64
		var entropy float64
		for i, s := range stats {
			f := strings.Fields(lines[i+1])
			require.Len(t, f, 12, lines[i+1]) // the shape and both sizes are two fields each
			assert.Equal(t, []string{s.Name, fmt.Sprintf("[%d,", s.Rows), fmt.Sprintf("%d]", s.Cols),
				fmt.Sprintf("%.3f", s.BitsPerWeight()), fmt.Sprintf("%.4f", s.Ratio()), fmt.Sprint(s.Escapes)}, f[:6])
			assert.Equal(t, size(s.Bytes), strings.Join(f[10:], " "), s.Name)
			bytes += s.Bytes
			bf16 += s.BF16Bytes
			escapes += s.Escapes
			weights += s.Weights()
			entropy += s.ExponentEntropy * float64(s.Weights())
		}
		w := float64(weights)
		want := fmt.Sprintf("total: %d matrices, %d weights: %.3f bits/weight (%.4f× bf16), escape rate %.4f%%, exponent entropy %.3f bits; %s in bf16, %s in lossless12",
			len(stats), weights, 8*float64(bytes)/w, float64(bytes)/float64(bf16), 100*float64(escapes)/w, entropy/w, size(bf16), size(bytes))
		assert.Equal(t, want, lines[len(lines)-1], filepath.Base(dir))
		if filepath.Base(dir) == "tiny" {
			readmeQuotes(t, lines)
		}
	}
	r := execK3(t, "", "", "info", filepath.Join(t.TempDir(), "none"), "--trunk-stats")
	assert.Equal(t, exitRuntime, r.code)
	assert.Contains(t, r.stderr, "none", r.stderr)
}

// readmeQuotes checks that every line the README quotes from the command on the tiny fixture is
// a line the command prints, the total among them.
func readmeQuotes(t *testing.T, lines []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	const cmd = "$ k3 info $K3_FIXTURES/models/tiny --trunk-stats"
	_, block, ok := strings.Cut(string(b), cmd)
	require.True(t, ok, "the README quotes %q", cmd)
	_, block, _ = strings.Cut(block, "\n")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	quoted := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	require.GreaterOrEqual(t, len(quoted), 2)
	for _, q := range quoted {
		assert.Contains(t, lines, q, "README line not printed by the command")
	}
	assert.Equal(t, lines[len(lines)-1], quoted[len(quoted)-1], "the README's total")
}
