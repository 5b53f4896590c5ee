package checkpoint_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
)

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

func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 32) + "  config.json\n"))
	f.Add([]byte(strings.Repeat("ab", 32) + " *a\n" + strings.Repeat("cd", 32) + "  b"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := checkpoint.ReadManifest(bytes.NewReader(data))
		if err != nil {
			return
		}
		back, err := checkpoint.ReadManifest(bytes.NewReader(m.Marshal()))
		require.NoError(t, err, "round trip")
		require.Equal(t, m.Files, back.Files, "round trip")
	})
}
