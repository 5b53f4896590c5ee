// Package race reports whether the binary was built with the race detector.
//
// Tests that count allocations consult it: under -race sync.Pool drops items
// at random, so the scratch pools of the kernels allocate now and then and
// exact allocation counts are meaningless. It imports nothing.
package race
