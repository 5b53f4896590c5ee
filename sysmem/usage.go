package sysmem

import (
	"io/fs"
	"os"
)

// PeakRSS is the largest resident set this process has had, in bytes
// (getrusage's ru_maxrss), or 0 where the system does not tell.
func PeakRSS() int64 { return peakRSS() }

// RSSFile is the file-backed part of this process's resident set now, in
// bytes (RssFile of /proc/self/status): for k3, the pages of memory-mapped
// shards. It is 0 where the system does not tell.
func RSSFile() int64 {
	n, err := rssFile(os.DirFS("/"))
	if err != nil {
		return 0
	}
	return n
}

func rssFile(fsys fs.FS) (int64, error) {
	b, err := fs.ReadFile(fsys, "proc/self/status")
	if err != nil {
		return 0, err
	}
	return meminfoField(b, "RssFile") // the same "Name: N kB" lines as meminfo
}
