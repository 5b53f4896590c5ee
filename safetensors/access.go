package safetensors

import (
	"errors"
	"io"
	"os"
	"strconv"

	"github.com/k3-project/k3/storage"
)

// Bytes returns the tensor's data as a read-only view of a shared memory
// mapping of its shard: no copy and no Go-heap memory. The view is valid
// until Close; writing to it faults. When the shard was opened through a
// custom opener (WithOpener) that is not an *os.File, Bytes returns a fresh
// heap copy instead. The shard's size is re-checked when it is mapped (the
// first Bytes call on it), so a shard that shrank since Open is refused
// (ErrShortRead) rather than mapped with a zero-filled tail. As with any mapping, truncating the file while the view
// is in use makes the access fault (SIGBUS): read views inside Guard, which
// turns the fault into ErrFault, and call CheckSizes before trusting
// results computed from them.
func (c *Checkpoint) Bytes(t *Tensor) ([]byte, error) {
	s, err := c.shardOf(t)
	if err != nil {
		return nil, err
	}

	if t.Size == 0 {
		return []byte{}, nil
	}
	f, ok := s.f.(*os.File)
	if !ok {
		buf := make([]byte, t.Size)
		if err := readFull(s.f, buf, t.Offset); err != nil {
			return nil, withTensor(err, t)
		}
		return buf, nil
	}
	s.mapOnce.Do(func() {
		if s.mapErr = s.checkSize(); s.mapErr != nil {
			return
		}
		s.mapped, s.mapErr = mapFile(f, s.size)
		s.isMapped.Store(s.mapErr == nil)
	})
	if s.mapErr != nil {
		if e, ok := s.mapErr.(*Error); ok {
			return nil, &Error{File: e.File, Tensor: t.Name, Pos: -1, Err: e.Err, Detail: e.Detail}
		}
		return nil, &Error{File: s.path, Tensor: t.Name, Pos: -1, Err: s.mapErr, Detail: "mmap"}
	}
	return s.mapped[t.Offset : t.Offset+t.Size : t.Offset+t.Size], nil
}

// ReadAt fills dst with the tensor's bytes starting off bytes into the
// tensor, using buffered reads (§7.5). Reading past the tensor's end is
// ErrOutOfRange; a file that ends early is ErrShortRead.
func (c *Checkpoint) ReadAt(t *Tensor, dst []byte, off int64) error {
	s, err := c.shardOf(t)
	if err != nil {
		return err
	}
	if off < 0 || off > t.Size || int64(len(dst)) > t.Size-off {
		return newErr(t.File, t.Name, -1, ErrOutOfRange,
			"offset "+strconv.FormatInt(off, 10)+" + "+strconv.Itoa(len(dst))+" bytes, tensor has "+strconv.FormatInt(t.Size, 10))
	}
	if err := readFull(s.f, dst, t.Offset+off); err != nil {
		return withTensor(err, t)
	}
	return nil
}

// Read returns a heap copy of the tensor's bytes, read with buffered I/O.
func (c *Checkpoint) Read(t *Tensor) ([]byte, error) {
	if _, err := c.shardOf(t); err != nil {
		return nil, err
	}
	buf := make([]byte, t.Size)
	if err := c.ReadAt(t, buf, 0); err != nil {
		return nil, err // never hand out a partly filled buffer
	}
	return buf, nil
}

// ReadF32 reads the tensor and widens it exactly to float32 (§5.1,
// §7.2). Dtypes without a float value (BOOL, C64, F4, F6_*) are refused
// with ErrNotWidenable.
func (c *Checkpoint) ReadF32(t *Tensor) ([]float32, error) {
	if _, err := c.shardOf(t); err != nil {
		return nil, err
	}
	if !Widenable(t.DType) {
		return nil, newErr(t.File, t.Name, -1, ErrNotWidenable, t.DType.String())
	}
	n := t.NumElements()
	src, err := c.Read(t)
	if err != nil {
		return nil, err
	}
	dst := make([]float32, n)
	if err := WidenF32(dst, src, t.DType); err != nil {
		return nil, withTensor(err, t)
	}
	return dst, nil
}

// ReadDirect reads the whole tensor into buf with an aligned direct read
// (§7.5) and returns the payload inside buf plus the mode used. buf
// must be 4096-aligned (see storage.AllocAligned) with capacity of at least
// storage.WindowLen(t.Offset, t.Size); on a file system that refuses O_DIRECT the
// read falls back to buffered I/O, reported once through the warnings.
func (c *Checkpoint) ReadDirect(t *Tensor, buf []byte) ([]byte, storage.Mode, error) {
	s, err := c.shardOf(t)
	if err != nil {
		return nil, 0, err
	}
	s.directOnce.Do(func() {
		f, isOS := s.f.(*os.File)
		switch {
		case c.opts.noDirect:
			s.direct = storage.NewBufferedReader(s.f)
		case !isOS:
			s.direct = storage.NewBufferedReader(s.f)
		default:
			s.direct = c.opts.openDirect(f, s.path)
			if s.direct.Mode() == storage.ModeBuffered {
				c.warn("safetensors: direct I/O unavailable for " + s.path + ", using buffered reads: " + errString(s.direct.FallbackReason()))
			}
		}
	})
	p, err := s.direct.ReadAligned(buf, t.Offset, t.Size)
	if err != nil {
		return nil, s.direct.Mode(), withTensor(err, t)
	}
	return p, s.direct.Mode(), nil
}

// DirectMode reports which read mode ReadDirect has used for t's shard so
// far (storage.ModeBuffered before the first direct read).
func (c *Checkpoint) DirectMode(t *Tensor) storage.Mode {
	s, err := c.shardOf(t)
	if err != nil || s.direct == nil {
		return storage.ModeBuffered
	}
	return s.direct.Mode()
}

func errString(err error) string {
	if err == nil {
		return "disabled"
	}
	return err.Error()
}

// withTensor labels an *Error (or wraps a foreign error) with the tensor.
func withTensor(err error, t *Tensor) error {
	if e, ok := err.(*Error); ok {
		if e.File == "" {
			e.File = t.File
		}
		if e.Tensor == "" {
			e.Tensor = t.Name
		}
		return e
	}
	return &Error{File: t.File, Tensor: t.Name, Pos: -1, Err: err}
}

// readFull is storage.ReadFull with a short read made an *Error, which the
// callers then label with the file and tensor (withFile, withTensor).
func readFull(r io.ReaderAt, p []byte, off int64) error {
	err := storage.ReadFull(r, p, off)
	if err != nil && errors.Is(err, ErrShortRead) {
		return &Error{Pos: -1, Err: err}
	}
	return err
}
