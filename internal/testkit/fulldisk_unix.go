//go:build unix

package testkit

import "syscall"

const canLimitFileSize = true

// limitFileSize makes this process's writes past n bytes fail (RLIMIT_FSIZE).
func limitFileSize(n uint64) error {
	return syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n})
}
