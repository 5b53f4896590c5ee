package testkit

import (
	"testing"

	"github.com/k3-project/k3/internal/kernels/parallel"
)

// SkipAllocsUnderRace skips a test that counts allocations when the binary
// runs under the race detector, where the counts are not exact.
func SkipAllocsUnderRace(tb testing.TB) {
	tb.Helper()
	if RaceEnabled {
		tb.Skip("allocation counts are not exact under the race detector")
	}
}

// NoAllocs reports an error unless f, run once to warm the pools and
// workspaces it reuses and then runs more times, allocates nothing. what
// names the call in the message. Call SkipAllocsUnderRace first.
func NoAllocs(tb testing.TB, what string, runs int, f func()) {
	tb.Helper()
	f()
	if n := testing.AllocsPerRun(runs, f); n != 0 {
		tb.Errorf("%s: %v allocations per run, want 0", what, n)
	}
}

// OnPools runs f as two subtests, the two ways a layer runs: "one worker"
// (workers 1, no pool) and "split on a pool" (workers 2 on a pool of 2
// helpers, closed when the test ends).
func OnPools(t *testing.T, f func(t *testing.T, workers int, pool *parallel.Pool)) {
	t.Helper()
	pool := parallel.NewPool(2)
	t.Cleanup(pool.Close)
	t.Run("one worker", func(t *testing.T) { f(t, 1, nil) })
	t.Run("split on a pool", func(t *testing.T) { f(t, 2, pool) })
}
