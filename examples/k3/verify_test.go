package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerifyManifestSyntax: a malformed --manifest is a usage error (exit 2) before the
// checkpoint is looked at; a well-formed one (two spaces or " *") gets past it.
func TestVerifyManifestSyntax(t *testing.T) {
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	manifest := func(s string) string {
		p := filepath.Join(t.TempDir(), "m.sha256")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := t.TempDir() // no shards: a well-formed manifest fails later, with exit 1
	code, _, stderr := runCLI(t, "verify", empty, "--manifest", manifest(sum+"  a.safetensors\n"+sum+" *config.json\n"))
	assert.Equal(t, exitRuntime, code, stderr)
	for i, bad := range []string{
		"", sum + " a\n", sum + "  a/b\n", sum + "  ..\n", "0X" + sum[2:] + "  a\n",
		sum + "  a\n" + sum + "  a\n", sum[:63] + "  a\n", "ABCDEF" + sum[6:] + "  a\n",
	} {
		code, _, stderr := runCLI(t, "verify", empty, "--manifest", manifest(bad))
		assert.Equal(t, exitUsage, code, itoa(i))
		assert.Contains(t, stderr, "--manifest", itoa(i))
	}
}

// TestExecVerifyWithoutIndex: verify on a directory without an index says so (it never claims
// the sizes match an index) and counts the tensors against the configuration, so one shard of
// three passes no longer; a shard grown in place is named as changed.
func TestExecVerifyWithoutIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	copyFiles(t, synthTiny(t), dir)
	r := execK3(t, "", "", "verify", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "sizes match the index; ")
	assert.Regexp(t, `(\d+) tensors, the configuration needs at least \d+`, r.stderr)

	require.NoError(t, os.Remove(filepath.Join(dir, "model.safetensors.index.json")))
	r = execK3(t, "", "", "verify", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "match the index")
	assert.Contains(t, r.stderr, "no model.safetensors.index.json")
	assert.Contains(t, r.stderr, "3 shard(s)")

	for _, s := range []string{"model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"} {
		require.NoError(t, os.Remove(filepath.Join(dir, s)))
	}
	r = execK3(t, "", "", "verify", dir)
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "match the index")
	assert.Contains(t, r.stderr, "k3 verify: config.json: ")
	assert.Contains(t, r.stderr, "fewer tensors than the configuration needs")
	assert.Contains(t, r.stderr, "a shard is missing?")
	assert.Contains(t, r.stderr, ": 1 problem(s)")

	// Without config.json the count is reported, not judged.
	require.NoError(t, os.Remove(filepath.Join(dir, "config.json")))
	r = execK3(t, "", "", "verify", dir)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no config.json to count them against")

	// A shard longer than its header says has changed.
	grown := filepath.Join(t.TempDir(), "g")
	copyFiles(t, synthTiny(t), grown)
	shard := filepath.Join(grown, "model-00001-of-00003.safetensors")
	f, err := os.OpenFile(shard, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("extra"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r = execK3(t, "", "", "verify", grown)
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, "k3 verify: model-00001-of-00003.safetensors: changed: ")
	assert.NotContains(t, r.stderr, "config.json", "one problem, not repeated as a tensor count")
}
