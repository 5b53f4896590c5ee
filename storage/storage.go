package storage

import (
	"io"
	"io/fs"

	"github.com/k3-project/k3/internal/fileio/regular"
)

// File is an opened weight file. *os.File implements it.
type File interface {
	io.ReaderAt
	io.Closer
	// Stat reports the file's information; its Size is the file's size
	// now, so a file truncated underneath its reader is noticed.
	Stat() (fs.FileInfo, error)
}

// Opener opens the file at path for reading.
type Opener func(path string) (File, error)

// ErrNotRegular: Open was given a directory, FIFO, device or socket.
var ErrNotRegular = regular.ErrNotRegular

// Open is the default Opener: it opens path read-only without blocking and
// returns the *os.File, or an error wrapping ErrNotRegular for anything but
// a regular file.
func Open(path string) (File, error) {
	f, _, err := regular.Open(path)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Size returns the size of the file behind f now.
func Size(f File) (int64, error) { return size(f) }
