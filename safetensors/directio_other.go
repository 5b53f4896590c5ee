//go:build !linux

package safetensors

import (
	"errors"
	"os"
)

var errNoDirect = errors.New("safetensors: O_DIRECT not implemented on this OS")

func openDirect(path string) (*DirectReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	d := openDirectFor(f, path)
	d.closers = append(d.closers, f)
	return d, nil
}

func openDirectFor(f *os.File, path string) *DirectReader {
	d := NewDirectReader(f, ModeBuffered, nil)
	d.reason = errNoDirect
	return d
}
