//go:build linux

package safetensors

import (
	"os"
	"syscall"
)

func openDirect(path string) (*DirectReader, error) {
	buf, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	d := openDirectFor(buf, path)
	d.closers = append(d.closers, buf)
	return d, nil
}

// openDirectFor opens a second, O_DIRECT descriptor next to the buffered
// file f, which serves the fallback. The caller keeps owning f.
func openDirectFor(f *os.File, path string) *DirectReader {
	df, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		d := NewDirectReader(f, ModeBuffered, nil)
		d.reason = err
		return d
	}
	d := NewDirectReader(df, ModeDirect, f)
	d.closers = append(d.closers, df)
	return d
}
