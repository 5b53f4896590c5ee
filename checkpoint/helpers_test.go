package checkpoint_test

import (
	"path/filepath"
	"testing"

	"github.com/k3-project/k3/checkpoint"
	"github.com/stretchr/testify/require"
)

// synthTiny writes the tiny geometry for seed into a fresh temporary
// directory.
func synthTiny(t testing.TB, seed int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	require.NoError(t, checkpoint.Synthesize(dir, "tiny", seed))
	return dir
}
