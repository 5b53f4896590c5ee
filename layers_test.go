package k3_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
)

// TestWithLayers: a prefix of the layers runs, says so, and differs from the full model; the
// full count is the full model.
func TestWithLayers(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	full := openModel(t, dir)
	want, err := full.Forward(context.Background(), ref.FullIDs)
	require.NoError(t, err)
	n := full.Config().NumLayers
	same := openModel(t, dir, k3.WithLayers(n))
	got, err := same.Forward(context.Background(), ref.FullIDs)
	require.NoError(t, err)
	assert.Equal(t, testkit.Digest(want...), testkit.Digest(got...))

	part := openModel(t, dir, k3.WithLayers(3), k3.WithTrunkBudget(1<<30))
	assert.Equal(t, 3, part.Layers())
	assert.Equal(t, n, part.Config().NumLayers)
	assert.Len(t, part.Plan().Trunk.Pinned, 3)
	w := strings.Join(part.Warnings(), "\n")
	assert.Contains(t, w, "running 3 of")
	p, err := part.Forward(context.Background(), ref.FullIDs)
	require.NoError(t, err)
	assert.NotEqual(t, testkit.Digest(want...), testkit.Digest(p...))

	_, err = k3.Open(dir, k3.WithLayers(n+1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the configuration has")
}

func TestWithConfigFile(t *testing.T) {
	dir := testkit.Models(t)[0]
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	alt := filepath.Join(t.TempDir(), "other.json")
	require.NoError(t, os.WriteFile(alt, b, 0o644))
	m := openModel(t, dir, k3.WithConfigFile(alt))
	assert.Equal(t, testkit.LoadReference(t, dir).Vocab, m.Config().Vocab)
	_, err = k3.Open(dir, k3.WithConfigFile(filepath.Join(t.TempDir(), "missing.json")))
	require.Error(t, err)
}
