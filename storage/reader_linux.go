//go:build linux

package storage

import (
	"os"
	"syscall"
)

// openDirectFor opens a second, O_DIRECT descriptor next to the buffered
// file f, which serves the fallback. The caller keeps owning f.
func openDirectFor(f *os.File, path string) *Reader {
	df, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		d := NewBufferedReader(f)
		d.reason = err
		return d
	}
	d := NewDirectReader(df, f)
	d.closers = append(d.closers, df)
	return d
}
