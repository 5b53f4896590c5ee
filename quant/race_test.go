//go:build race

package quant

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts through the scratch pools are not exact.
const raceEnabled = true
