//go:build !linux

package storage

import (
	"errors"
	"os"
)

var errNoDirect = errors.New("storage: O_DIRECT not implemented on this OS")

func openDirectFor(f *os.File, path string) *Reader {
	d := NewBufferedReader(f)
	d.reason = errNoDirect
	return d
}
