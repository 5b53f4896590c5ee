package safetensors

import (
	"errors"
	"io"
	"strconv"
	"syscall"
)

// maxChunk caps one read call: Linux returns at most 2,147,479,552 bytes
// per read and Darwin refuses 2 GiB or more (SPEC §7.5).
const maxChunk = 1 << 30

// readFull fills p from r at off. It loops over chunks of at most 1 GiB,
// retries EINTR, and reports a short read (EOF before len(p)) as
// ErrShortRead rather than returning partial data.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	want := len(p)
	for len(p) > 0 {
		n := min(len(p), maxChunk)
		got, err := r.ReadAt(p[:n], off)
		if got < 0 || got > n {
			return errors.New("safetensors: ReadAt returned an invalid count " + strconv.Itoa(got))
		}
		p = p[got:]
		off += int64(got)
		switch {
		case err == nil && got == 0:
			return shortRead(want, want-len(p), off)
		case err == nil:
		case errors.Is(err, syscall.EINTR):
		case errors.Is(err, io.EOF):
			if got == n {
				continue
			}
			return shortRead(want, want-len(p), off)
		default:
			return err
		}
	}
	return nil
}

func shortRead(want, got int, off int64) error {
	return &Error{Pos: -1, Err: ErrShortRead,
		Detail: "got " + strconv.Itoa(got) + " of " + strconv.Itoa(want) + " bytes, stopped at offset " + strconv.FormatInt(off, 10)}
}
