package testkit

import (
	"path/filepath"
	"testing"
)

// Synth writes the checkpoint synthesize makes of geometry for seed into a
// new directory named for the geometry under tb.TempDir(), and returns it:
// for the small checkpoints a test writes for itself, where Checkpoint keeps
// the large ones between runs.
func Synth(tb testing.TB, synthesize Synthesizer, geometry string, seed int64) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), geometry)
	if err := synthesize(dir, geometry, seed); err != nil {
		tb.Fatalf("testkit: synthesizing %s (seed %d): %v", geometry, seed, err)
	}
	return dir
}
