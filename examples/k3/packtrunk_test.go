package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
)

// TestPackTrunkLossless12: pack-trunk --format lossless12 writes a smaller trunk.bin whose
// trunk.json names the format, and run --trunk on it reproduces the reference's full_ids at the
// floor and all pinned; an unknown format is a usage error.
func TestPackTrunkLossless12(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := readRef(t, dir)
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
		var rep struct {
			FullIDs []int `json:"full_ids"`
		}
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &rep))
		assert.Equal(t, ref.FullIDs, rep.FullIDs, "%v", extra)
	}
	code, _, stderr = runCLI(t, "pack-trunk", dir, t.TempDir(), "--format", "zstd")
	assert.Equal(t, exitUsage, code)
	assert.True(t, strings.Contains(stderr, "--format") && strings.Contains(stderr, `"zstd"`), stderr)
}
