//go:build linux || darwin || freebsd || netbsd || openbsd

package main

import (
	"runtime"
	"syscall"
)

// peakRSS is the process's maximum resident set size (getrusage ru_maxrss), in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss) // bytes on Darwin
	}
	return int64(ru.Maxrss) * 1024 // KiB elsewhere
}
