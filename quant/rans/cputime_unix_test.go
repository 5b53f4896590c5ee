//go:build unix

package rans

import (
	"syscall"
	"time"
)

// cpuTime is the process's user CPU time: on a shared machine, bytes per
// CPU-second measure a single core's speed far more steadily than wall time.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano()), true
}
