//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package sysmem

func peakRSS() int64 { return 0 }
