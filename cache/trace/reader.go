package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/k3-project/k3/internal/fileio/regular"
)

var (
	// ErrSize reports a trace whose record bytes are not a multiple of 8,
	// or that holds more bytes than its header counts.
	ErrSize = errors.New("trace: size does not fit whole records")
	// ErrRecord reports a record with a negative layer or an expert
	// outside [0, 2^20) (the simulator packs keys as layer<<20 | expert),
	// or, in a trace with a header, outside its geometry.
	ErrRecord = errors.New("trace: invalid record")
)

// MaxExpert bounds expert ids in a trace (exclusive).
const MaxExpert = 1 << 20

// Request is one demand request.
type Request struct {
	Layer, Expert int32
}

// Key is the simulator's key of §9.7: layer<<20 | expert.
func (r Request) Key() uint64 { return uint64(r.Layer)<<20 | uint64(r.Expert) }

// Trace is an open trace file. Records are read on demand (ReadRequests),
// so holding a Trace costs no memory in proportion to its length.
type Trace struct {
	f      *os.File
	path   string
	hdr    Header
	headed bool
	base   int64 // offset of record 0
	n      int64
}

// Open opens the trace at path and checks its length: a trace with a header
// must hold exactly the records it counts (fewer: ErrTruncated; more:
// ErrSize); a headerless one (§9.7's original form, read for old dumps)
// must be a whole number of records, and nothing else about it can be
// checked — Headerless reports it so that callers can warn. Anything but a
// regular file is refused before it could block.
func Open(path string) (*Trace, error) {
	f, size, err := regular.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	t, err := newTrace(f, path, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	return t, nil
}

func newTrace(f *os.File, path string, size int64) (*Trace, error) {
	t := &Trace{f: f, path: path}
	var b [HeaderSize]byte
	m, err := f.ReadAt(b[:min(size, HeaderSize)], 0)
	if int64(m) != min(size, HeaderSize) {
		return nil, fmt.Errorf("trace: reading %s: %w", path, err)
	}
	if !hasMagic(b[:m]) {
		if size%8 != 0 {
			return nil, fmt.Errorf("%w: %s has %d bytes and no header", ErrSize, path, size)
		}
		t.n = size / 8
		return t, nil
	}
	if t.hdr, err = ParseHeader(b[:m]); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.headed, t.base = true, HeaderSize
	body := size - HeaderSize
	switch want := t.hdr.Records * 8; {
	case body < want:
		return nil, fmt.Errorf("%w: %s holds %d bytes of records, its header counts %d records (%d bytes)",
			ErrTruncated, path, body, t.hdr.Records, want)
	case body > want:
		return nil, fmt.Errorf("%w: %s holds %d bytes after its %d records", ErrSize, path, body-want, t.hdr.Records)
	}
	t.n = t.hdr.Records
	return t, nil
}

// Header returns the trace's header, and false for a headerless trace.
func (t *Trace) Header() (Header, bool) { return t.hdr, t.headed }

// Headerless reports a trace in the original form without a header.
func (t *Trace) Headerless() bool { return !t.headed }

// Len is the number of requests.
func (t *Trace) Len() int { return int(t.n) }

// ReadRequests decodes and validates records first, first+1, … into dst,
// up to len(dst) or the end of the trace, and returns how many it decoded.
func (t *Trace) ReadRequests(dst []Request, first int64) (int, error) {
	if first < 0 || first > t.n {
		return 0, fmt.Errorf("trace: record %d outside [0, %d]", first, t.n)
	}
	var buf [8 << 10]byte
	got := 0
	for got < len(dst) && first+int64(got) < t.n {
		k := min(len(dst)-got, len(buf)/8, int(t.n-first-int64(got)))
		off := t.base + 8*(first+int64(got))
		if m, err := t.f.ReadAt(buf[:8*k], off); m != 8*k {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the file shrank after Open
			}
			return got, fmt.Errorf("trace: reading %s at byte %d: %w", t.path, off, err)
		}
		if err := t.decode(dst[got:got+k], buf[:8*k], first+int64(got)); err != nil {
			return got, fmt.Errorf("%s: %w", t.path, err)
		}
		got += k
	}
	return got, nil
}

// decode fills dst from b (8·len(dst) bytes) whose first record is number first.
func (t *Trace) decode(dst []Request, b []byte, first int64) error {
	for i := range dst {
		r, err := decodeRecord(b[8*i:], first+int64(i))
		if err != nil {
			return err
		}
		if t.headed && (int(r.Layer) >= t.hdr.Layers || int(r.Expert) >= t.hdr.Experts) {
			return fmt.Errorf("%w: record %d is (%d, %d), outside %d layers × %d experts",
				ErrRecord, first+int64(i), r.Layer, r.Expert, t.hdr.Layers, t.hdr.Experts)
		}
		dst[i] = r
	}
	return nil
}

// Requests decodes and validates every record into one slice; a long
// trace is better read in pieces with ReadRequests.
func (t *Trace) Requests() ([]Request, error) {
	out := make([]Request, t.n)
	n, err := t.ReadRequests(out, 0)
	if err != nil {
		return nil, err
	}
	return out[:n], nil
}

// Close closes the file.
func (t *Trace) Close() error { return t.f.Close() }

// Decode parses the records of a headerless trace held in memory.
func Decode(b []byte) ([]Request, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrSize, len(b))
	}
	out := make([]Request, len(b)/8)
	for i := range out {
		r, err := decodeRecord(b[8*i:], int64(i))
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// decodeRecord decodes the record at the start of b, number i.
func decodeRecord(b []byte, i int64) (Request, error) {
	l := int32(binary.LittleEndian.Uint32(b))
	e := int32(binary.LittleEndian.Uint32(b[4:]))
	if l < 0 || e < 0 || e >= MaxExpert {
		return Request{}, fmt.Errorf("%w: record %d is (%d, %d)", ErrRecord, i, l, e)
	}
	return Request{Layer: l, Expert: e}, nil
}

// Encode renders requests as the records of an expert_trace.bin image
// (without a header: Header.AppendBinary makes one).
func Encode(reqs []Request) []byte {
	b := make([]byte, 8*len(reqs))
	for i, r := range reqs {
		binary.LittleEndian.PutUint32(b[8*i:], uint32(r.Layer))
		binary.LittleEndian.PutUint32(b[8*i+4:], uint32(r.Expert))
	}
	return b
}
