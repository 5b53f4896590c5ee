// Package regular opens the small files the library reads whole
// (config.json, tokenizer files, index files) and the shards it maps, with
// two refusals every reader needs: anything but a regular file, and more
// bytes than the caller allows.
//
// A FIFO, a character device or a socket in place of a model file would
// block open(2) or read(2) forever, or stream without end; a regular file
// cannot. Open therefore opens with O_NONBLOCK (which makes open(2) of a
// FIFO return at once) and checks the mode with fstat on the descriptor it
// got, so a file swapped in between a Stat and the open is still caught.
//
// This package imports only the standard library.
package regular

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

var (
	// ErrNotRegular: the path names a directory, FIFO, device or socket.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file holds more bytes than the caller's limit.
	ErrTooLarge = errors.New("file larger than the limit")
)

// Open opens path read-only without blocking and returns the file and its
// size, or an error wrapping ErrNotRegular (the file is closed again).
func Open(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w (mode %v)", path, ErrNotRegular, st.Mode().Type())
	}
	return f, st.Size(), nil
}

// ReadFile reads the regular file path whole, refusing (ErrTooLarge) one
// larger than limit bytes before reading it, and one that grows past limit
// while it is read.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, size, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > limit {
		return nil, fmt.Errorf("%s: %w (%d bytes, limit %d)", path, ErrTooLarge, size, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w (grew past %d bytes while read)", path, ErrTooLarge, limit)
	}
	return data, nil
}
