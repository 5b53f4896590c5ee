package k3_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
)

func TestManifest(t *testing.T) {
	dir := synthTiny(t, 8)
	var buf bytes.Buffer
	var calls int
	require.NoError(t, k3.WriteManifest(dir, &buf, func(string, int64, int64) { calls++ }))
	assert.Positive(t, calls)
	m, err := k3.ReadManifest(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Len(t, m.Files, 5) // config, index, three shards
	assert.Equal(t, buf.Bytes(), m.Marshal())
	require.NoError(t, k3.VerifyManifest(dir, m, nil))

	// A changed byte and a truncated shard are both named.
	s1, s3 := shardPath(dir, 1), shardPath(dir, 3)
	flip(t, s1, 1000)
	st, err := os.Stat(s3)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(s3, st.Size()-1))
	err = k3.VerifyManifest(dir, m, nil)
	var me *k3.ManifestError
	require.ErrorAs(t, err, &me)
	assert.ErrorIs(t, err, k3.ErrManifestMismatch)
	require.Len(t, me.Problems, 2)
	assert.Contains(t, err.Error(), filepath.Base(s1)+": sha256")
	assert.Contains(t, err.Error(), filepath.Base(s3)+": ")

	for _, bad := range []string{`{}`, `{"files": [{"name": "../x", "size": 1, "sha256": "` + strings.Repeat("0", 64) + `"}]}`,
		`{"files": [{"name": "a", "size": -1, "sha256": "` + strings.Repeat("0", 64) + `"}]}`,
		`{"files": [{"name": "a", "size": 1, "sha256": "00"}]}`, `{"files": [1]}`, `{"files": [{"name": "a"}]}`} {
		_, err := k3.ReadManifest(strings.NewReader(bad))
		assert.ErrorIs(t, err, k3.ErrManifest, bad)
	}
}

func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(`{"files": [{"name": "a", "size": 1, "sha256": "` + strings.Repeat("ab", 32) + `"}]}`))
	f.Add([]byte(`{"files": []}`))
	f.Add([]byte(`{"files": [{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := k3.ReadManifest(bytes.NewReader(data))
		if err != nil {
			return
		}
		back, err := k3.ReadManifest(bytes.NewReader(m.Marshal()))
		if err != nil || len(back.Files) != len(m.Files) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
