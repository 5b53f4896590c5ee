package trace

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/exp/mmap"
)

var (
	// ErrSize reports a trace whose size is not a multiple of 8.
	ErrSize = errors.New("trace: size is not a multiple of 8 bytes")
	// ErrRecord reports a record with a negative layer or an expert
	// outside [0, 2^20) (the simulator packs keys as layer<<20 | expert).
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

// Trace is a trace file mapped read-only.
type Trace struct {
	r *mmap.ReaderAt
	n int
}

// Open maps the trace at path and checks its size.
func Open(path string) (*Trace, error) {
	r, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if r.Len()%8 != 0 {
		r.Close()
		return nil, fmt.Errorf("%w: %s has %d bytes", ErrSize, path, r.Len())
	}
	return &Trace{r: r, n: r.Len() / 8}, nil
}

// Len is the number of requests.
func (t *Trace) Len() int { return t.n }

// Requests decodes and validates every record.
func (t *Trace) Requests() ([]Request, error) {
	out := make([]Request, 0, t.n)
	var buf [1 << 16]byte
	for off := int64(0); off < int64(t.n)*8; {
		n := min(int64(len(buf)), int64(t.n)*8-off)
		if m, err := t.r.ReadAt(buf[:n], off); int64(m) != n {
			return nil, fmt.Errorf("trace: reading records at byte %d: %w", off, err)
		}
		var err error
		if out, err = appendDecoded(out, buf[:n], int(off/8)); err != nil {
			return nil, err
		}
		off += n
	}
	return out, nil
}

// Close unmaps the file.
func (t *Trace) Close() error { return t.r.Close() }

// Decode parses a whole trace held in memory.
func Decode(b []byte) ([]Request, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrSize, len(b))
	}
	return appendDecoded(make([]Request, 0, len(b)/8), b, 0)
}

// appendDecoded decodes b (a multiple of 8 bytes) whose first record is
// number first.
func appendDecoded(out []Request, b []byte, first int) ([]Request, error) {
	for i := 0; i+8 <= len(b); i += 8 {
		l := int32(binary.LittleEndian.Uint32(b[i:]))
		e := int32(binary.LittleEndian.Uint32(b[i+4:]))
		if l < 0 || e < 0 || e >= MaxExpert {
			return nil, fmt.Errorf("%w: record %d is (%d, %d)", ErrRecord, first+i/8, l, e)
		}
		out = append(out, Request{Layer: l, Expert: e})
	}
	return out, nil
}

// Encode renders requests as an expert_trace.bin image.
func Encode(reqs []Request) []byte {
	b := make([]byte, 8*len(reqs))
	for i, r := range reqs {
		binary.LittleEndian.PutUint32(b[8*i:], uint32(r.Layer))
		binary.LittleEndian.PutUint32(b[8*i+4:], uint32(r.Expert))
	}
	return b
}
