//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package main

// peakRSS is unknown on this platform.
func peakRSS() int64 { return 0 }
