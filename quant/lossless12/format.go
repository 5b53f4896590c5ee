package lossless12

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Layout constants (§6.11). Changing any of them is a format change.
const (
	// BlockSize is the number of consecutive weights of a row that share an
	// exponent window. The last block of a row may be shorter.
	BlockSize = 64
	// IndexBits is the width of a weight's exponent index.
	IndexBits = 3
	// Window is the number of consecutive exponents an index can name.
	Window = 1<<IndexBits - 1
	// EscapeIndex is the index that sends a weight's exponent to the row's
	// escape area.
	EscapeIndex = Window
	// MaxBase is the largest window base: the window [base, base+Window−1]
	// must stay inside the 8-bit exponent.
	MaxBase = 255 - (Window - 1)
	// HeaderSize is the length of the header in front of the rows.
	HeaderSize = 16
	// MaxDim bounds rows and cols, so that every size fits in an int64 and
	// a header cannot make a reader allocate without bound.
	MaxDim = 1 << 31
)

// magic opens every encoded matrix. oldMagic opened the format's first
// layout (4-bit indices, §6.11.3), which is refused with a reason that says
// so.
var (
	magic    = [4]byte{'L', '1', '2', '3'}
	oldMagic = [4]byte{'L', 'L', '1', '2'}
)

// Sentinel errors; every error of this package matches one of them.
var (
	// ErrMalformed reports encoded bytes that are not a valid matrix.
	ErrMalformed = errors.New("lossless12: malformed matrix")
	// ErrShape reports a shape or buffer length that does not fit.
	ErrShape = errors.New("lossless12: invalid shape")
)

// MalformedError says where and why encoded bytes were refused. Row is −1
// for the header and Block is −1 for a fault of the whole row (its escape
// area).
type MalformedError struct {
	Row, Block int
	Reason     string
}

func (e *MalformedError) Error() string {
	switch {
	case e.Row < 0:
		return fmt.Sprintf("lossless12: malformed header: %s", e.Reason)
	case e.Block < 0:
		return fmt.Sprintf("lossless12: malformed row %d: %s", e.Row, e.Reason)
	}
	return fmt.Sprintf("lossless12: malformed row %d block %d: %s", e.Row, e.Block, e.Reason)
}

// Unwrap returns ErrMalformed.
func (e *MalformedError) Unwrap() error { return ErrMalformed }

// Header is the fixed part in front of the rows.
type Header struct {
	Rows, Cols int
	// Escapes is the number of escape bytes every row carries.
	Escapes int
}

// RowBytes returns the length of one encoded row: the block bases, a byte
// of sign and mantissa per weight, three bits of exponent index per weight
// (three bit planes a block) and the escape area.
func (h Header) RowBytes() int64 {
	c := int64(h.Cols)
	return blocks(c) + c + planeBytes(c) + int64(h.Escapes)
}

// planeBytes is the length of a row's index area: each block stores its
// indices as IndexBits planes of one bit a column, ⌈n/8⌉ bytes a plane for
// a block of n columns, which adds up to IndexBits·⌈cols/8⌉ because only the
// last block can be short.
func planeBytes(cols int64) int64 { return IndexBits * ((cols + 7) / 8) }

// Size returns the length of the whole encoded matrix.
func (h Header) Size() int64 { return HeaderSize + int64(h.Rows)*h.RowBytes() }

func blocks(cols int64) int64 { return (cols + BlockSize - 1) / BlockSize }

// check validates the header's numbers against each other.
func (h Header) check() error {
	switch {
	case h.Rows < 0 || h.Rows >= MaxDim || h.Cols < 0 || h.Cols >= MaxDim:
		return &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("shape [%d, %d] outside [0, 2^31)", h.Rows, h.Cols)}
	case h.Escapes < 0 || h.Escapes > h.Cols:
		return &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("%d escape bytes per row for %d columns", h.Escapes, h.Cols)}
	}
	return nil
}

func (h Header) put(dst []byte) {
	copy(dst, magic[:])
	binary.LittleEndian.PutUint32(dst[4:], uint32(h.Rows))
	binary.LittleEndian.PutUint32(dst[8:], uint32(h.Cols))
	binary.LittleEndian.PutUint32(dst[12:], uint32(h.Escapes))
}

// ParseHeader reads and checks the header of encoded bytes, including that
// len(data) is exactly the size it declares; it does not look at the rows
// (Open does).
func ParseHeader(data []byte) (Header, error) {
	return ParseHeaderOf(data, int64(len(data)))
}

// ParseHeaderOf is ParseHeader for a matrix of which only the first bytes
// are at hand: head holds at least its header and size is the matrix's whole
// length, so a reader can check a stored matrix's header against what an
// index says of it without reading its rows.
func ParseHeaderOf(head []byte, size int64) (Header, error) {
	if len(head) < HeaderSize || size < HeaderSize {
		return Header{}, &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("%d bytes, shorter than the %d-byte header", min(int64(len(head)), size), HeaderSize)}
	}
	if [4]byte(head[:4]) == oldMagic {
		return Header{}, &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("magic %q is the first layout's (4-bit indices), which this reader no longer decodes: pack the trunk again", head[:4])}
	}
	if [4]byte(head[:4]) != magic {
		return Header{}, &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("magic %q, want %q", head[:4], magic[:])}
	}
	h := Header{
		Rows:    int(binary.LittleEndian.Uint32(head[4:])),
		Cols:    int(binary.LittleEndian.Uint32(head[8:])),
		Escapes: int(binary.LittleEndian.Uint32(head[12:])),
	}
	if err := h.check(); err != nil {
		return Header{}, err
	}
	if want := h.Size(); size != want {
		return Header{}, &MalformedError{Row: -1, Block: -1,
			Reason: fmt.Sprintf("%d bytes, header [%d, %d] with %d escape bytes per row needs %d", size, h.Rows, h.Cols, h.Escapes, want)}
	}
	return h, nil
}

// EscapesForSize returns the escape bytes per row that make a [rows, cols]
// matrix exactly size bytes long, and false when no count does. It lets a
// reader check a stored tensor's length against the shape it expects before
// reading a byte of it.
func EscapesForSize(rows, cols int, size int64) (int, bool) {
	if rows < 0 || rows >= MaxDim || cols < 0 || cols >= MaxDim || size < HeaderSize {
		return 0, false
	}
	base := Header{Rows: rows, Cols: cols}
	body := size - HeaderSize
	if rows == 0 {
		return 0, body == 0
	}
	if body%int64(rows) != 0 {
		return 0, false
	}
	e := body/int64(rows) - base.RowBytes()
	if e < 0 || e > int64(cols) {
		return 0, false
	}
	return int(e), true
}

// canonicalBase is the window base of a block whose largest exponent is
// emax: the window ends at emax unless that would put its base below 0.
// (emax ≤ 255 keeps it at or below MaxBase.)
func canonicalBase(emax int) int {
	return max(emax-(Window-1), 0)
}
