package trunk

import (
	"fmt"
	"os"

	"github.com/k3-project/k3/safetensors"
)

// File is what the store reads weights through. *safetensors.DirectReader implements it:
// aligned O_DIRECT reads with a buffered fallback. Tests supply their own to inject faults.
type File interface {
	// ReadAligned reads n bytes at off; the payload starts at off%4096 of buf in direct mode
	// and at buf[0] in buffered mode (the store only asks for aligned offsets, where both
	// agree). See safetensors.DirectReader.ReadAligned.
	ReadAligned(buf []byte, off, n int64) ([]byte, error)
	Mode() safetensors.IOMode
	Close() error
}

// Opener opens a weight file and returns it with its size, which bounds every read: a file that
// shrinks afterwards gives a short-read error, never zeros.
type Opener func(path string) (File, int64, error)

// OpenFile is the default Opener: O_DIRECT where the file system allows it, buffered otherwise
// (File.Mode reports which). Non-regular files are refused so a FIFO cannot block a read.
func OpenFile(path string) (File, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("trunk: %s is not a regular file (%v)", path, st.Mode().Type())
	}
	d, err := safetensors.OpenDirect(path)
	if err != nil {
		return nil, 0, err
	}
	return d, st.Size(), nil
}

// BufferedOpener opens files for buffered reads only.
func BufferedOpener(path string) (File, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("trunk: %s is not a regular file (%v)", path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	return &bufferedFile{d: safetensors.NewDirectReader(f, safetensors.ModeBuffered, nil), f: f}, st.Size(), nil
}

type bufferedFile struct {
	d *safetensors.DirectReader
	f *os.File
}

func (b *bufferedFile) ReadAligned(buf []byte, off, n int64) ([]byte, error) {
	return b.d.ReadAligned(buf, off, n)
}
func (b *bufferedFile) Mode() safetensors.IOMode { return safetensors.ModeBuffered }
func (b *bufferedFile) Close() error             { return b.f.Close() }
