package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the length of the header of §9.7 that starts every trace
// written since it was introduced; the records follow it.
const HeaderSize = 48

// magic starts a trace with a header. Read as the first record of a
// headerless trace it would be layer 0x5458334B (1,415,066,443), which no
// model has, so the two forms cannot be confused.
var magic = [4]byte{'K', '3', 'X', 'T'}

const headerVersion = 1

// maxRecords bounds the record count a header may claim: the file it
// describes must fit in an int64.
const maxRecords = (1<<63 - 1 - HeaderSize) / 8

var (
	// ErrHeader reports a header that is damaged (checksum), from an
	// unknown version, or whose geometry is impossible.
	ErrHeader = errors.New("trace: invalid header")
	// ErrTruncated reports a trace holding fewer records than its header
	// counts: a dump that stopped part-way (a full disk, a copy cut short).
	ErrTruncated = errors.New("trace: truncated")
	// ErrExpertBytes reports an expert size that contradicts the one the
	// trace's header records.
	ErrExpertBytes = errors.New("trace: expert size differs from the trace's")
)

// Geometry is the model a trace was recorded on. Zero TopK, MoELayers or
// ExpertBytes mean unknown.
type Geometry struct {
	// Layers and Experts bound every record: layer < Layers, expert < Experts.
	Layers, Experts int
	// TopK experts are requested per token in each of the MoELayers MoE
	// layers, so a decoded token makes TopK·MoELayers requests.
	TopK, MoELayers int
	// ExpertBytes is one routed expert's bytes in the checkpoint.
	ExpertBytes int64
}

// Check reports an impossible geometry.
func (g Geometry) Check() error {
	switch {
	case g.Layers < 1 || g.Layers > 1<<20:
		return fmt.Errorf("%w: %d layers (want 1 to 2^20)", ErrHeader, g.Layers)
	case g.Experts < 1 || g.Experts > MaxExpert:
		return fmt.Errorf("%w: %d experts (want 1 to 2^20)", ErrHeader, g.Experts)
	case g.TopK < 0 || g.TopK > g.Experts:
		return fmt.Errorf("%w: top-k %d with %d experts", ErrHeader, g.TopK, g.Experts)
	case g.MoELayers < 0 || g.MoELayers > g.Layers:
		return fmt.Errorf("%w: %d MoE layers of %d", ErrHeader, g.MoELayers, g.Layers)
	case g.ExpertBytes < 0 || g.ExpertBytes > 1<<40:
		return fmt.Errorf("%w: expert size %d bytes (want 0 to 2^40)", ErrHeader, g.ExpertBytes)
	}
	return nil
}

// RequestsPerToken is TopK·MoELayers, or 0 when either is unknown.
func (g Geometry) RequestsPerToken() int64 { return int64(g.TopK) * int64(g.MoELayers) }

// CheckExpertBytes returns an error wrapping ErrExpertBytes when the
// geometry records an expert size and n differs from it.
func (g Geometry) CheckExpertBytes(n int64) error {
	if g.ExpertBytes != 0 && n != g.ExpertBytes {
		return fmt.Errorf("%w: %d bytes given, the trace was recorded with %d", ErrExpertBytes, n, g.ExpertBytes)
	}
	return nil
}

// Header is what precedes the records: the geometry and how many records
// follow. All fields are little-endian:
//
//	0  magic "K3XT"     4  version (1)      8  layers         12 experts
//	16 top-k (0: ?)     20 MoE layers (0: ?) 24 expert bytes (uint64, 0: ?)
//	32 records (uint64) 40 CRC-32 (IEEE) of bytes 0–39     44 zero
type Header struct {
	Geometry
	Records int64
}

// AppendBinary appends the header's HeaderSize bytes to b.
func (h Header) AppendBinary(b []byte) ([]byte, error) {
	if err := h.Check(); err != nil {
		return b, err
	}
	if h.Records < 0 || h.Records > maxRecords {
		return b, fmt.Errorf("%w: %d records", ErrHeader, h.Records)
	}
	start := len(b)
	b = append(b, magic[:]...)
	b = binary.LittleEndian.AppendUint32(b, headerVersion)
	for _, v := range []int{h.Layers, h.Experts, h.TopK, h.MoELayers} {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(h.ExpertBytes))
	b = binary.LittleEndian.AppendUint64(b, uint64(h.Records))
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
	return binary.LittleEndian.AppendUint32(b, 0), nil
}

// hasMagic reports whether b starts like a trace with a header.
func hasMagic(b []byte) bool { return len(b) >= 4 && [4]byte(b[:4]) == magic }

// ParseHeader decodes the header at the start of b. It checks the magic,
// version, checksum and geometry; that the records are all there is the
// reader's check (it knows the file's size).
func ParseHeader(b []byte) (Header, error) {
	if !hasMagic(b) {
		return Header{}, fmt.Errorf("%w: no magic %q", ErrHeader, magic[:])
	}
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header cut short at %d of %d bytes", ErrTruncated, len(b), HeaderSize)
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[4:]); v != headerVersion {
		return Header{}, fmt.Errorf("%w: version %d (this reader knows %d)", ErrHeader, v, headerVersion)
	}
	if sum, want := crc32.ChecksumIEEE(b[:40]), le.Uint32(b[40:]); sum != want {
		return Header{}, fmt.Errorf("%w: checksum %08x, header says %08x", ErrHeader, sum, want)
	}
	if z := le.Uint32(b[44:]); z != 0 {
		return Header{}, fmt.Errorf("%w: reserved field is %d", ErrHeader, z)
	}
	u32 := func(off int) (int, error) {
		v := le.Uint32(b[off:])
		if v > 1<<31-1 {
			return 0, fmt.Errorf("%w: field at byte %d is %d", ErrHeader, off, v)
		}
		return int(v), nil
	}
	var h Header
	var err error
	for i, p := range []*int{&h.Layers, &h.Experts, &h.TopK, &h.MoELayers} {
		if *p, err = u32(8 + 4*i); err != nil {
			return Header{}, err
		}
	}
	eb, n := le.Uint64(b[24:]), le.Uint64(b[32:])
	if eb > 1<<40 {
		return Header{}, fmt.Errorf("%w: expert size %d bytes", ErrHeader, eb)
	}
	if n > maxRecords {
		return Header{}, fmt.Errorf("%w: %d records", ErrHeader, n)
	}
	h.ExpertBytes, h.Records = int64(eb), int64(n)
	if err := h.Check(); err != nil {
		return Header{}, err
	}
	return h, nil
}
