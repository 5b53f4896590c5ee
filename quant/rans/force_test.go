package rans

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/safetensors"
)

// leftovers plants in out the temporaries an interrupted Repack leaves behind and returns
// their names.
func leftovers(t *testing.T, out string) []string {
	t.Helper()
	names := []string{".cfs1-spill-123", ".copy-456", ".tmp-789", ".model-00001-of-00003.safetensors.42.tmp"}
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(out, n), []byte("stale"), 0o600))
	}
	return names
}

// requireNoOutput checks that out holds nothing a reader accepts as a coded checkpoint: no
// manifest (Verify refuses it), no index, no shard of the previous output's coded shards, and
// none of Repack's temporaries.
func requireNoOutput(t *testing.T, out string, codedShards []string) {
	t.Helper()
	assert.NoFileExists(t, filepath.Join(out, ManifestFileName))
	assert.NoFileExists(t, filepath.Join(out, safetensors.IndexFileName))
	_, err := Verify(out, VerifyOptions{})
	assert.ErrorIs(t, err, os.ErrNotExist, "Verify without a manifest")
	for _, n := range codedShards {
		assert.NoFileExists(t, filepath.Join(out, n), "a shard of the previous output")
	}
	for _, n := range testkit.DirNames(t, out) {
		assert.False(t, isTemporary(n), "temporary %s left in the output", n)
	}
}

// codedShardNames are the shards of the finished output in out that hold coded tensors.
func codedShardNames(t *testing.T, out string, man *Manifest) []string {
	t.Helper()
	ck, err := safetensors.Open(out)
	require.NoError(t, err)
	defer ck.Close()
	seen := map[string]bool{}
	var names []string
	for _, e := range man.Tensors {
		tt, ok := ck.Tensor(e.Name)
		require.True(t, ok)
		if n := filepath.Base(tt.File); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	require.NotEmpty(t, names)
	return names
}

// TestRepackForceInvalidatesFirst: Force over a finished output that is cancelled part-way
// (after its first coded tensor) leaves no manifest, no index, none of the old coded shards and
// no temporary, including the ones an earlier interrupted run left; the source is untouched. A
// later Force run gives an output that verifies, again with stale temporaries removed.
func TestRepackForceInvalidatesFirst(t *testing.T) {
	src, out, man := repackTest(t)
	coded := codedShardNames(t, out, man)
	srcBefore := testkit.DirNames(t, src)
	leftovers(t, out)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Repack(src, out, RepackOptions{Select: expertRule, Force: true, Workers: 1, Context: ctx,
		Progress: func(p Progress) {
			if p.Op == "code" {
				cancel()
			}
		}})
	require.ErrorIs(t, err, context.Canceled)
	requireNoOutput(t, out, coded)
	assert.Equal(t, srcBefore, testkit.DirNames(t, src), "nothing written in the source")

	stale := leftovers(t, out)
	_, err = Repack(src, out, RepackOptions{Select: expertRule, Force: true})
	require.NoError(t, err)
	_, err = Verify(out, VerifyOptions{})
	require.NoError(t, err)
	for _, n := range stale {
		assert.NoFileExists(t, filepath.Join(out, n), "a stale temporary survives a successful Force")
	}
}

// TestRepackCancelBeforeManifest: a cancellation that comes after the last shard is written
// still writes neither the index nor the manifest.
func TestRepackCancelBeforeManifest(t *testing.T) {
	src, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	writeTestCheckpoint(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shards := 0
	_, err := Repack(src, out, RepackOptions{Select: expertRule, Context: ctx, Progress: func(p Progress) {
		if p.Op == "write" || p.Op == "link" && filepath.Ext(p.File) == ".safetensors" {
			if shards++; shards == 3 { // the last of the three shards
				cancel()
			}
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	requireNoOutput(t, out, nil)
}

// TestRepackForceFullDisk: Force over a finished output in a process whose writes fail past a
// few kilobytes (a full disk) fails, and leaves neither the old output nor temporaries.
func TestRepackForceFullDisk(t *testing.T) {
	if dir, ok := testkit.FullDiskChild("K3_RANS_FORCE_FULL"); ok {
		_, err := Repack(filepath.Join(dir, "src"), filepath.Join(dir, "out"), RepackOptions{Select: expertRule, Force: true})
		fmt.Println("RESULT", errors.Is(err, nil), err)
		return
	}
	src, out, man := repackTest(t)
	dir := filepath.Dir(out)
	require.NoError(t, os.Rename(src, filepath.Join(dir, "src")))
	coded := codedShardNames(t, out, man)
	leftovers(t, out)
	line := testkit.RunFullDisk(t, "TestRepackForceFullDisk", "K3_RANS_FORCE_FULL", dir)
	require.Contains(t, line, "RESULT false", "the repack must fail on a full disk")
	require.Contains(t, line, "file too large")
	requireNoOutput(t, out, coded)
}
