package storage

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// Errors of reads (errors.Is).
var (
	// ErrShortRead: the file ended before the bytes asked for.
	ErrShortRead = errors.New("storage: short read")
	// ErrUnaligned: a direct read's buffer is not 4096-aligned or too small.
	ErrUnaligned = errors.New("storage: direct-I/O buffer not 4096-aligned or too small")
	// ErrOutOfRange: a negative offset or length, or one that overflows.
	ErrOutOfRange = errors.New("storage: read offset or length out of range")
)

// maxChunk caps one read call: Linux returns at most 2,147,479,552 bytes
// per read and Darwin refuses 2 GiB or more (§7.5).
const maxChunk = 1 << 30

// ReadFull fills p from r at off. It loops over chunks of at most 1 GiB,
// retries EINTR, and reports a short read (EOF before len(p)) as an error
// wrapping ErrShortRead rather than returning partial data.
func ReadFull(r io.ReaderAt, p []byte, off int64) error {
	want := int64(len(p))
	for len(p) > 0 {
		n := min(len(p), maxChunk)
		got, err := r.ReadAt(p[:n], off)
		if got < 0 || got > n {
			return fmt.Errorf("storage: ReadAt returned an invalid count %d", got)
		}
		p = p[got:]
		off += int64(got)
		switch {
		case err == nil && got == 0:
			return shortRead(want, want-int64(len(p)), off)
		case err == nil:
		case errors.Is(err, syscall.EINTR):
		case errors.Is(err, io.EOF):
			if got == n {
				continue
			}
			return shortRead(want, want-int64(len(p)), off)
		default:
			return err
		}
	}
	return nil
}

func shortRead(want, got, off int64) error {
	return fmt.Errorf("%w: got %d of %d bytes, stopped at offset %d", ErrShortRead, got, want, off)
}
