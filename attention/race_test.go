//go:build race

package attention

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts through internal/dot's scratch pool are not exact.
const raceEnabled = true
