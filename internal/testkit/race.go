//go:build race

package testkit

// RaceEnabled is true when built with -race. Under -race sync.Pool drops
// items at random, so the scratch pools of the kernels allocate now and then
// and exact allocation counts are meaningless; timings are the race
// runtime's, not the library's.
const RaceEnabled = true
