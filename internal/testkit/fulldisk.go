package testkit

import (
	"fmt"
	"os"
	"runtime"
	"testing"
)

// FullDiskLimit is the file size limit a full-disk child writes under, in bytes.
const FullDiskLimit = 4096

// A test of what a full disk does re-runs itself as a child whose writes past
// FullDiskLimit bytes fail part-way (RLIMIT_FSIZE: write(2) returns EFBIG, as it
// would return ENOSPC on a full disk; Go ignores SIGXFSZ):
//
//	func TestX(t *testing.T) {
//		if dir, ok := testkit.FullDiskChild("K3_X_FULL"); ok {
//			... write into dir, fmt.Println("RESULT", ...) ...
//			return
//		}
//		line := testkit.RunFullDisk(t, "TestX", "K3_X_FULL", dir)
//	}

// FullDiskChild returns the directory the parent passed under key and whether
// this process is the child RunFullDisk started; in the child the file size
// limit is set on return. A child that cannot set it prints a RESULT line
// saying so and exits.
func FullDiskChild(key string) (string, bool) {
	dir, ok := ChildArg(key)
	if !ok {
		return "", false
	}
	if err := limitFileSize(FullDiskLimit); err != nil {
		fmt.Println("RESULT setrlimit", err)
		os.Exit(0)
	}
	return dir, true
}

// RunFullDisk runs the test named test again as a full-disk child working in
// dir and returns the first line it printed that starts with RESULT. It skips
// the test where there is no file size limit (off unix).
func RunFullDisk(tb testing.TB, test, key, dir string) string {
	tb.Helper()
	if !canLimitFileSize {
		tb.Skip("no file size limit to fill a disk with on " + runtime.GOOS)
	}
	return ChildLine(tb, RunChild(tb, test, key, dir), "RESULT")
}
