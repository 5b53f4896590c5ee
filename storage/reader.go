package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

// Alignment is the block size of direct reads: offsets, lengths and buffer
// addresses are multiples of it.
const Alignment = 4096

// Mode says how a Reader reads.
type Mode uint8

const (
	// ModeBuffered reads through the page cache (pad is always 0).
	ModeBuffered Mode = iota
	// ModeDirect reads with O_DIRECT into aligned buffers.
	ModeDirect
)

// String returns "buffered" or "direct".
func (m Mode) String() string {
	switch m {
	case ModeBuffered:
		return "buffered"
	case ModeDirect:
		return "direct"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Window returns the 4096-aligned window enclosing [off, off+n): lo =
// off &^ 4095, hi = (off+n+4095) &^ 4095, and the payload's position pad =
// off − lo inside it.
func Window(off, n int64) (lo, hi, pad int64) {
	lo = off &^ (Alignment - 1)
	hi = (off + n + Alignment - 1) &^ (Alignment - 1)
	return lo, hi, off - lo
}

// WindowLen is the buffer size a direct read of n bytes at off needs.
func WindowLen(off, n int64) int64 {
	lo, hi, _ := Window(off, n)
	return hi - lo
}

// Reader performs the aligned reads of §7.5 on one file. It reads with
// O_DIRECT when the file system allows it and otherwise falls back to
// buffered reads, which Mode and FallbackReason report.
type Reader struct {
	mu       sync.Mutex
	direct   io.ReaderAt // nil in buffered mode
	buffered io.ReaderAt
	closers  []io.Closer
	mode     Mode
	reason   error
}

// NewReader reads f (opened from path) with aligned reads: through a
// second, O_DIRECT descriptor of path when f is an *os.File and the file
// system allows it, through f's own ReadAt otherwise (Mode and
// FallbackReason say which), so a File that injects faults sees every read.
// Close closes only the descriptor NewReader opened; the caller keeps
// owning f.
func NewReader(f File, path string) *Reader {
	if of, ok := f.(*os.File); ok {
		return openDirectFor(of, path)
	}
	return NewBufferedReader(f)
}

// OpenReader opens path with Open for aligned reads (NewReader). The Reader
// owns the file: Close closes it.
func OpenReader(path string) (*Reader, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	d := NewReader(f, path)
	d.closers = append(d.closers, f)
	return d, nil
}

// NewDirectReader reads direct, which must behave like an O_DIRECT
// descriptor (reads of whole aligned windows), and falls back to fallback
// (which may be nil) when a direct read is refused with EINVAL. Tests use it
// to stand in for a file system's rules.
func NewDirectReader(direct, fallback io.ReaderAt) *Reader {
	return &Reader{mode: ModeDirect, direct: direct, buffered: fallback}
}

// NewBufferedReader reads r through its ReadAt only.
func NewBufferedReader(r io.ReaderAt) *Reader {
	return &Reader{mode: ModeBuffered, buffered: r}
}

// Mode reports the current read mode.
func (d *Reader) Mode() Mode {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mode
}

// FallbackReason is the error that made the reader use buffered reads, or
// nil.
func (d *Reader) FallbackReason() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reason
}

// ReadAligned reads n bytes at absolute offset off and returns them as a
// sub-slice of buf. In direct mode buf must start on a 4096-byte boundary
// and have capacity ≥ WindowLen(off, n); the whole window is read and the
// payload starts at off & 4095. A window running past end of file is fine
// as long as the payload itself was read. In buffered mode the payload is
// read to buf[0:n].
func (d *Reader) ReadAligned(buf []byte, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > math.MaxInt64-n-Alignment {
		return nil, fmt.Errorf("%w: offset %d length %d", ErrOutOfRange, off, n)
	}
	d.mu.Lock()
	direct, buffered := d.direct, d.buffered
	d.mu.Unlock()
	if direct != nil {
		p, err := readWindow(direct, buf, off, n)
		if err == nil || !errors.Is(err, syscall.EINVAL) || buffered == nil {
			return p, err
		}
		d.fallback(err)
	}
	if int64(cap(buf)) < n {
		return nil, fmt.Errorf("%w: buffer capacity %d < %d", ErrUnaligned, cap(buf), n)
	}
	p := buf[:n]
	if err := ReadFull(buffered, p, off); err != nil {
		return nil, err
	}
	return p, nil
}

// fallback switches to buffered reads after the kernel refused a direct
// read (some file systems accept O_DIRECT at open and refuse at read).
func (d *Reader) fallback(err error) {
	d.mu.Lock()
	d.direct = nil
	d.mode = ModeBuffered
	d.reason = err
	d.mu.Unlock()
}

// readWindow is the direct-mode loop: read [lo, hi) in aligned chunks; EOF
// is success once pad+n bytes arrived.
func readWindow(r io.ReaderAt, buf []byte, off, n int64) ([]byte, error) {
	lo, hi, pad := Window(off, n)
	w := hi - lo
	if int64(cap(buf)) < w || (cap(buf) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%Alignment != 0) {
		return nil, fmt.Errorf("%w: need a 4096-aligned buffer of %d bytes, have capacity %d", ErrUnaligned, w, cap(buf))
	}
	if w == 0 {
		return buf[:0], nil
	}
	buf = buf[:w]
	var got int64
	for got < w {
		k := min(w-got, maxChunk)
		m, err := r.ReadAt(buf[got:got+k], lo+got)
		if m < 0 || int64(m) > k {
			return nil, fmt.Errorf("storage: ReadAt returned an invalid count %d", m)
		}
		got += int64(m)
		if err == nil {
			if m == 0 {
				break
			}
			continue
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		return nil, err
	}
	if got < pad+n {
		return nil, shortRead(pad+n, got, lo+got)
	}
	return buf[pad : pad+n : pad+n], nil
}

// Close closes the descriptors the Reader opened (and, from OpenReader, its
// file).
func (d *Reader) Close() error {
	var first error
	for _, c := range d.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	d.closers = nil
	return first
}
