package checkpoint_test

import (
	"testing"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
)

// synthTiny writes the tiny geometry for seed into a fresh temporary
// directory.
func synthTiny(t testing.TB, seed int64) string {
	t.Helper()
	return testkit.Synth(t, checkpoint.Synthesize, "tiny", seed)
}
