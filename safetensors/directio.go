package safetensors

import (
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"github.com/k3-project/k3/storage"
)

// Alignment is the block size of direct reads: offsets, lengths and buffer
// addresses are multiples of it.
const Alignment = 4096

// IOMode says how a DirectReader reads.
type IOMode uint8

const (
	// ModeBuffered reads through the page cache (pad is always 0).
	ModeBuffered IOMode = iota
	// ModeDirect reads with O_DIRECT into aligned buffers.
	ModeDirect
)

// String returns "buffered" or "direct".
func (m IOMode) String() string {
	switch m {
	case ModeBuffered:
		return "buffered"
	case ModeDirect:
		return "direct"
	}
	return "IOMode(" + strconv.Itoa(int(m)) + ")"
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

// DirectReader performs the aligned reads of SPEC §7.5 on one file. It
// reads with O_DIRECT when the file system allows it and otherwise falls
// back to buffered reads, which Mode and FallbackReason report.
type DirectReader struct {
	mu       sync.Mutex
	direct   io.ReaderAt // nil in buffered mode
	buffered io.ReaderAt
	closers  []io.Closer
	mode     IOMode
	reason   error
}

// NewDirectReader wraps r. With ModeDirect, r must behave like an O_DIRECT
// descriptor (reads of whole aligned windows); buffered is used for the
// fallback when a direct read is refused with EINVAL and may be nil. This
// is the fault-injection seam for tests.
func NewDirectReader(r io.ReaderAt, mode IOMode, buffered io.ReaderAt) *DirectReader {
	d := &DirectReader{mode: mode}
	if mode == ModeDirect {
		d.direct, d.buffered = r, buffered
	} else {
		d.buffered = r
	}
	return d
}

// OpenDirect opens path for aligned direct reads, falling back to buffered
// reads when O_DIRECT is refused (FallbackReason says why).
func OpenDirect(path string) (*DirectReader, error) {
	d, err := openDirect(path)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// NewAlignedReader reads f (opened from path) with aligned reads: through a
// second, O_DIRECT descriptor of path when f is an *os.File and the file
// system allows it, through f's own ReadAt otherwise (Mode and
// FallbackReason say which), so a File that injects faults sees every read.
// Close closes only the descriptor it opened; the caller keeps owning f.
func NewAlignedReader(f storage.File, path string) *DirectReader {
	if of, ok := f.(*os.File); ok {
		return openDirectFor(of, path)
	}
	return NewDirectReader(f, ModeBuffered, nil)
}

// Mode reports the current read mode.
func (d *DirectReader) Mode() IOMode {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mode
}

// FallbackReason is the error that made the reader use buffered reads, or
// nil.
func (d *DirectReader) FallbackReason() error {
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
func (d *DirectReader) ReadAligned(buf []byte, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > maxInt64-n-Alignment {
		return nil, &Error{Pos: -1, Err: ErrOutOfRange, Detail: "offset " + strconv.FormatInt(off, 10) + " length " + strconv.FormatInt(n, 10)}
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
		return nil, &Error{Pos: -1, Err: ErrUnaligned, Detail: "buffer capacity " + strconv.Itoa(cap(buf)) + " < " + strconv.FormatInt(n, 10)}
	}
	p := buf[:n]
	if err := readFull(buffered, p, off); err != nil {
		return nil, err
	}
	return p, nil
}

// fallback switches to buffered reads after the kernel refused a direct
// read (some file systems accept O_DIRECT at open and refuse at read).
func (d *DirectReader) fallback(err error) {
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
		return nil, &Error{Pos: -1, Err: ErrUnaligned,
			Detail: "need a 4096-aligned buffer of " + strconv.FormatInt(w, 10) + " bytes, have capacity " + strconv.Itoa(cap(buf))}
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
			return nil, errors.New("safetensors: ReadAt returned an invalid count " + strconv.Itoa(m))
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
		return nil, shortRead(int(pad+n), int(got), lo+got)
	}
	return buf[pad : pad+n : pad+n], nil
}

// Close closes the descriptors OpenDirect opened.
func (d *DirectReader) Close() error {
	var first error
	for _, c := range d.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	d.closers = nil
	return first
}
