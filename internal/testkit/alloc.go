package testkit

import "testing"

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
