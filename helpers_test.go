package k3_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/safetensors"
)

// synthTiny writes the tiny geometry for seed into a fresh temporary directory.
func synthTiny(t testing.TB, seed int64) string {
	t.Helper()
	return testkit.Synth(t, checkpoint.Synthesize, "tiny", seed)
}

// perfDir returns the directory of the perf checkpoint (testkit.PerfDir with this module's
// synthesizer), for the benchmarks and the floor tests.
func perfDir(tb testing.TB) string {
	tb.Helper()
	return testkit.PerfDir(tb, checkpoint.Synthesize)
}

// openModel opens dir with opts, failing the test on an error; the model is closed when the
// test ends.
func openModel(t testing.TB, dir string, opts ...k3.Option) *k3.Model {
	t.Helper()
	m, err := k3.Open(dir, opts...)
	require.NoError(t, err, "open %s", dir)
	t.Cleanup(func() { m.Close() })
	return m
}

// f32bits returns the bit patterns of v, for comparisons that must tell −0 from +0 and NaNs
// apart.
func f32bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// sweepThreads returns the thread counts of the bit-identity sweeps that cross configurations
// with threads: 1 and 2, or only 2 under -race. The race detector looks for unsynchronised
// memory access, and one thread adds none that two lack (the sessions step from their own
// goroutines either way); with both counts the package's race run alone took 12–14 minutes,
// past go test's 10-minute default. The plain run checks both counts' bits.
func sweepThreads() []int {
	if testkit.RaceEnabled {
		return []int{2}
	}
	return []int{1, 2}
}

// forEachModel runs f on every fixture model (testkit.Models) with its reference, each as a
// subtest named for the model; under -race on the first model only. Its callers are the
// bit-identity sweeps, which the plain run checks on every model; what -race looks for, an
// unsynchronised access, does not depend on the geometry, and with every model the package's
// race run needed more than go test's 10-minute default when `go test -race ./...` runs it
// beside other packages.
func forEachModel(t *testing.T, f func(t *testing.T, dir string, ref *testkit.Reference)) {
	t.Helper()
	dirs := testkit.Models(t)
	if testkit.RaceEnabled {
		dirs = dirs[:1]
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) { f(t, dir, testkit.LoadReference(t, dir)) })
	}
}

// prefilled returns a new session of m after prompt and a snapshot of it, for the tests and
// benchmarks that restore it before each of several continuations.
func prefilled(tb testing.TB, m *k3.Model, prompt []int) (*k3.Session, *k3.Snapshot) {
	tb.Helper()
	s := m.NewSession()
	require.NoError(tb, s.Prefill(context.Background(), prompt))
	snap, err := s.Snapshot()
	require.NoError(tb, err)
	return s, snap
}

// firstTensor returns the first tensor of dir's checkpoint whose name match accepts, for the
// tests that inject a fault under one tensor's bytes.
func firstTensor(t *testing.T, dir string, match func(name string) bool) *safetensors.Tensor {
	t.Helper()
	ck, err := safetensors.Open(dir)
	require.NoError(t, err)
	defer ck.Close()
	for _, tt := range ck.Tensors() {
		if match(tt.Name) {
			return tt
		}
	}
	t.Fatalf("%s: no tensor matches", dir)
	return nil
}
