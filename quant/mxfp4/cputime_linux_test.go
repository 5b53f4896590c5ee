//go:build linux

package mxfp4

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time consumed by the calling OS thread (callers
// lock the goroutine to it), so a benchmark on a shared machine can report
// throughput per CPU-second, which other processes do not dilute.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
