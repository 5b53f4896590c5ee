package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// PerfEnv names the environment variable holding the directory of the
// synthetic perf checkpoint (or receiving it, on first use).
const PerfEnv = "K3_PERF_DIR"

// Synthesizer writes a random checkpoint of the named geometry into dir
// (k3.Synthesize). It is taken as an argument so that testkit imports
// nothing of the module: the root package's internal tests use it too.
type Synthesizer func(dir, geometry string, seed int64) error

// Checkpoint is a synthesized checkpoint kept between runs in the directory
// named by an environment variable, written there on first use: the perf
// geometry takes minutes and about 1.6 GB, too much to write on every run
// or by default.
type Checkpoint struct {
	Env        string // the variable naming the directory
	Geometry   string // the geometry passed to Synthesize
	Seed       int64
	Synthesize Synthesizer

	// After, when set, runs once right after synthesis: for a checkpoint
	// that differs from the synthesized one (digests added, say).
	After func(tb testing.TB, dir string)

	// TempDir makes Dir synthesize into a temporary directory when Env is
	// unset, instead of skipping.
	TempDir bool
}

// Perf is the perf checkpoint of the benchmarks and the floor tests:
// geometry "perf", seed 1, in $K3_PERF_DIR.
func Perf(synthesize Synthesizer) Checkpoint {
	return Checkpoint{Env: PerfEnv, Geometry: "perf", Seed: 1, Synthesize: synthesize}
}

// PerfDir returns the directory of the perf checkpoint, writing it there
// with synthesize when it holds none: Perf(synthesize).Dir(tb). A benchmark
// of the root package starts
//
//	dir := testkit.PerfDir(b, k3.Synthesize)
func PerfDir(tb testing.TB, synthesize Synthesizer) string {
	tb.Helper()
	return Perf(synthesize).Dir(tb)
}

// Dir returns the checkpoint's directory, synthesizing it when the directory
// holds no config.json. It skips the test under -short, and when Env is
// unset (unless TempDir is set).
func (c Checkpoint) Dir(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s checkpoint: skipped under -short", c.Geometry)
	}
	dir := os.Getenv(c.Env)
	if dir == "" {
		if !c.TempDir {
			tb.Skipf("%s checkpoint: set %s to a directory holding it (or to receive it on first use)", c.Geometry, c.Env)
		}
		dir = filepath.Join(tb.TempDir(), c.Geometry)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir
	}
	if err := c.Synthesize(dir, c.Geometry, c.Seed); err != nil {
		tb.Fatalf("testkit: synthesizing the %s checkpoint into %s: %v", c.Geometry, dir, err)
	}
	if c.After != nil {
		c.After(tb, dir)
	}
	return dir
}
