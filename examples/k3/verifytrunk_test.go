package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/trunk"
)

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
