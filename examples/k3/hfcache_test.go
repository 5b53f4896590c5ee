package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hfLayout lays the files of src out as the Hugging Face cache does: the bytes in
// root/blobs/<sha256>, and root/snapshots/<rev>/<name> a relative symbolic link to its blob. It
// returns the snapshot directory, the model directory a user names.
func hfLayout(t *testing.T, src, root string) string {
	t.Helper()
	snap := filepath.Join(root, "snapshots", "0123abcd")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "blobs"), 0o755))
	require.NoError(t, os.MkdirAll(snap, 0o755))
	es, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		sum := sha256.Sum256(b)
		blob := hex.EncodeToString(sum[:])
		require.NoError(t, os.WriteFile(filepath.Join(root, "blobs", blob), b, 0o644))
		require.NoError(t, os.Symlink(filepath.Join("..", "..", "blobs", blob), filepath.Join(snap, e.Name())))
	}
	return snap
}

// tree lists every path under root with its type and size, to show it unchanged.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = fi.Mode().String() + " " + fi.ModTime().String()
		if fi.Mode().IsRegular() {
			out[rel] += " " + strconv.FormatInt(fi.Size(), 10)
		}
		return nil
	}))
	return out
}

// regularFiles requires every entry of dir to be a regular file (no link, dangling or not,
// back into the source) and returns their names.
func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular(), "%s is %v", e.Name(), fi.Mode())
		names = append(names, e.Name())
	}
	return names
}

// TestExecHuggingFaceLayout: on a model directory whose files are relative symbolic links into
// a blob directory (the Hugging Face cache), verify passes, compress-experts writes a complete
// copy of regular files that verifies and runs after the cache is gone, pack-trunk writes a
// trunk that runs, the source tree is left as it was, and every run gives the ids of the
// original model (the coded copy and the packed trunk are bit-exact).
func TestExecHuggingFaceLayout(t *testing.T) {
	src := synthTiny(t)
	tmp := t.TempDir()
	cache := filepath.Join(tmp, "hub", "models--k3--tiny")
	model := hfLayout(t, src, cache)
	before := tree(t, cache)

	r := execK3(t, "", "", "verify", model)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "sizes match the index")

	coded := filepath.Join(tmp, "coded")
	r = execK3(t, "", "", "compress-experts", model, coded)
	require.Equal(t, exitOK, r.code, r.stderr)
	packed := filepath.Join(tmp, "packed")
	r = execK3(t, "", "", "pack-trunk", model, packed)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, before, tree(t, cache), "nothing written in the source tree")

	names := regularFiles(t, coded)
	srcNames, err := os.ReadDir(model)
	require.NoError(t, err)
	for _, e := range srcNames {
		assert.Contains(t, names, e.Name(), "every file of the model is in the copy")
	}
	regularFiles(t, packed)

	gen := []string{"-p", "hi", "--gen", "6", "--no-stop"}
	run := func(cwd string, args ...string) []int {
		t.Helper()
		r := execK3(t, cwd, "", append(append(args, gen...), "--out", "r.json")...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		ids := ints(t, readReport(t, filepath.Join(cwd, "r.json"))["generated_ids"])
		require.Len(t, ids, 6)
		return ids
	}
	want := run(t.TempDir(), "run", src)
	assert.Equal(t, want, run(t.TempDir(), "run", model), "the linked model")
	assert.Equal(t, want, run(t.TempDir(), "run", model, "--trunk", packed), "the packed trunk")

	r = execK3(t, "", "", "verify", coded)
	assert.Equal(t, exitOK, r.code, r.stderr)
	// The copy stands alone: with the cache gone it still verifies, decodes and runs.
	require.NoError(t, os.RemoveAll(cache))
	r = execK3(t, "", "", "verify-experts", coded)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, want, run(t.TempDir(), "run", coded), "the coded copy")
}
