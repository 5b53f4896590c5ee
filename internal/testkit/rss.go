package testkit

import (
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns this process's peak resident set (VmHWM of
// /proc/self/status) in bytes, or −1 where there is no such file. A test
// that bounds the memory of one operation measures it in a child process
// (see RunChild) that reads its own figure: the parent's rusage of a
// vfork'd child also counts the parent's pages from before the exec.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return -1
		}
		return kb << 10
	}
	return -1
}
