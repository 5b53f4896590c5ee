package cfs1

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record layout constants.
const (
	Magic      = "CFS1"
	ModeRaw    = 0 // the bytes themselves
	ModeNibble = 1 // rANS over 2n nibbles, low nibble first
	ModeByte   = 2 // rANS over n bytes

	headerLen = 9       // magic, mode, rawlen
	scaleBits = 12      // probability resolution
	probScale = 1 << 12 // Σ freq
	lowBound  = 1 << 23 // L: states live in [L, 2^31)
	stateMax  = 1 << 31
)

// Sentinel errors; every decode error matches ErrCorrupt or ErrTooLarge.
var (
	// ErrCorrupt reports a record that is malformed, truncated or fails the
	// seal.
	ErrCorrupt = errors.New("cfs1: corrupt record")
	// ErrTooLarge reports a record declaring more bytes than the caller's
	// buffer or limit holds.
	ErrTooLarge = errors.New("cfs1: record larger than the destination")
	// ErrMode reports an unknown mode given to Encode.
	ErrMode = errors.New("cfs1: unknown mode")
)

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...)
}

func alphabet(mode byte) int {
	if mode == ModeNibble {
		return 16
	}
	return 256
}

// Header returns the mode and the decoded length of a record after checking
// the magic, the mode, and the record length a raw record must have (modes
// 1 and 2 are checked fully only by DecodeInto).
func Header(record []byte) (mode byte, rawLen int, err error) {
	if len(record) < headerLen {
		return 0, 0, corrupt("record is %d bytes, shorter than the %d-byte header", len(record), headerLen)
	}
	if string(record[:4]) != Magic {
		return 0, 0, corrupt("bad magic %q", record[:4])
	}
	mode = record[4]
	n := int(binary.LittleEndian.Uint32(record[5:9]))
	switch mode {
	case ModeRaw:
		if len(record) != headerLen+n {
			return 0, 0, corrupt("raw record of %d bytes declares %d, want length %d", len(record), n, headerLen+n)
		}
	case ModeNibble, ModeByte:
		a := alphabet(mode)
		if n == 0 {
			return 0, 0, corrupt("coded record (mode %d) declares 0 bytes", mode)
		}
		if len(record) < headerLen+2*a+8 {
			return 0, 0, corrupt("mode %d record is %d bytes, shorter than its %d-byte header", mode, len(record), headerLen+2*a+8)
		}
	default:
		return 0, 0, corrupt("unknown mode %d", mode)
	}
	return mode, n, nil
}

// DecodeInto decodes record into dst[:rawLen] and returns rawLen. It refuses
// (ErrTooLarge) a record declaring more than len(dst) bytes, and (ErrCorrupt)
// anything that does not decode exactly; dst[:rawLen] may then hold partial
// output. It allocates nothing.
func DecodeInto(dst, record []byte) (int, error) {
	mode, n, err := Header(record)
	if err != nil {
		return 0, err
	}
	if n > len(dst) {
		return 0, fmt.Errorf("%w: record declares %d bytes, destination holds %d", ErrTooLarge, n, len(dst))
	}
	dst = dst[:n]
	if mode == ModeRaw {
		copy(dst, record[headerLen:])
		return n, nil
	}
	a := alphabet(mode)
	var freq, cum [256]uint32
	var sum uint32
	for s := range a {
		freq[s] = uint32(binary.LittleEndian.Uint16(record[headerLen+2*s:]))
		cum[s] = sum
		sum += freq[s]
	}
	if sum != probScale {
		return 0, corrupt("frequencies sum to %d, want %d", sum, probScale)
	}
	var slot2sym [probScale]uint8
	for s := range a {
		for k := cum[s]; k < cum[s]+freq[s]; k++ {
			slot2sym[k] = uint8(s)
		}
	}
	p := headerLen + 2*a
	x := [2]uint32{binary.LittleEndian.Uint32(record[p:]), binary.LittleEndian.Uint32(record[p+4:])}
	for i, v := range x {
		if v < lowBound || v >= stateMax {
			return 0, corrupt("initial state %c = %#x outside [2^23, 2^31)", 'A'+i, v)
		}
	}
	payload := record[p+8:]
	pos := 0
	m := n
	if mode == ModeNibble {
		m = 2 * n
	}
	for j := range m {
		st := &x[j&1]
		v := *st
		slot := v & (probScale - 1)
		s := slot2sym[slot]
		v = freq[s]*(v>>scaleBits) + slot - cum[s]
		for v < lowBound {
			if pos == len(payload) {
				return 0, corrupt("payload exhausted at symbol %d of %d", j, m)
			}
			v = v<<8 | uint32(payload[pos])
			pos++
		}
		*st = v
		if mode == ModeNibble {
			if j&1 == 0 {
				dst[j>>1] = s
			} else {
				dst[j>>1] |= s << 4
			}
		} else {
			dst[j] = s
		}
	}
	if pos != len(payload) {
		return 0, corrupt("%d payload bytes left after the last symbol", len(payload)-pos)
	}
	if x[0] != lowBound || x[1] != lowBound {
		return 0, corrupt("seal broken: final states %#x, %#x, want %#x", x[0], x[1], lowBound)
	}
	return n, nil
}

// Decode returns the decoded bytes of record in a new slice of at most
// maxLen bytes; a record declaring more is refused (ErrTooLarge) before
// anything is allocated. The limit is the caller's, because the record
// cannot justify its length: a symbol of frequency 4096 costs no payload
// bits, so a valid 529-byte record decodes to 4 GiB. Pass the length the
// tensor's format and shape imply.
func Decode(record []byte, maxLen int) ([]byte, error) {
	_, n, err := Header(record)
	if err != nil {
		return nil, err
	}
	if n > maxLen {
		return nil, fmt.Errorf("%w: record declares %d bytes, limit %d", ErrTooLarge, n, maxLen)
	}
	dst := make([]byte, n)
	if _, err := DecodeInto(dst, record); err != nil {
		return nil, err
	}
	return dst, nil
}
