//go:build linux

package mxfp4

import (
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPUTime is CLOCK_THREAD_CPUTIME_ID of clock_gettime(2).
const clockThreadCPUTime = 3

// threadCPU returns the CPU time consumed by the calling OS thread (callers
// lock the goroutine to it), so a benchmark on a shared machine can report
// throughput per CPU-second, which other processes do not dilute. It reads
// the nanosecond thread clock: getrusage(RUSAGE_THREAD) is only as fine as
// the scheduler tick, too coarse to split one iteration into two phases.
func threadCPU() (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
