//go:build !linux

package mxfp4

import "time"

// threadCPU is unavailable here; benchmarks then report wall-clock figures only.
func threadCPU() (time.Duration, bool) { return 0, false }
