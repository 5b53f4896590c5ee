//go:build linux

package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// rssFile returns the file-backed resident pages of the process now (RssFile of
// /proc/self/status): memory-mapped shard pages, i.e. the mapped experts.
func rssFile() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
