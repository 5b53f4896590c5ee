package rans

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/k3-project/k3/quant/cfs1"
)

// Encode returns the CFS1 nibble record (mode 1) of 4-bit weight bytes, or
// a raw record (mode 0) when coding would not make it shorter, so a record
// never exceeds its input by more than 9 bytes. The output depends on data
// only. Every record is decoded by package cfs1's independent decoder and
// compared with data before it is returned.
//
// The frequencies are cfs1.Frequencies' (§6.9.1's with ties broken),
// so the records are cfs1.Encode's, bit for bit; this encoder is the faster
// of the two.
func Encode(data []byte) ([]byte, error) {
	return encode(data, cfs1.ModeNibble)
}

// EncodeBytes is Encode over byte symbols (mode 2), for E8M0 scale arrays.
func EncodeBytes(data []byte) ([]byte, error) {
	return encode(data, cfs1.ModeByte)
}

func encode(data []byte, mode byte) ([]byte, error) {
	if uint64(len(data)) > 1<<32-1 {
		return nil, fmt.Errorf("rans: %d bytes exceed the u32 length field", len(data))
	}
	var rec []byte
	if len(data) > 0 {
		if freq, ok := cfs1.Frequencies(data, mode); ok {
			rec = encodeWith(data, mode, freq)
		}
	}
	if rec == nil {
		rec = make([]byte, headerLen+len(data))
		copy(rec, cfs1.Magic)
		rec[4] = cfs1.ModeRaw
		binary.LittleEndian.PutUint32(rec[5:], uint32(len(data)))
		copy(rec[headerLen:], data)
	}
	back := make([]byte, len(data))
	if n, err := cfs1.DecodeInto(back, rec); err != nil || n != len(data) || !bytes.Equal(back, data) {
		return nil, fmt.Errorf("rans: internal error: record does not decode to its input (%v)", err)
	}
	return rec, nil
}

// encodeWith codes data with the given frequencies (summing to 4096), or
// returns nil when the record would not be shorter than the raw one.
func encodeWith(data []byte, mode byte, freq [256]uint32) []byte {
	a := 16
	m := 2 * len(data)
	if mode == cfs1.ModeByte {
		a, m = 256, len(data)
	}
	var cum [256]uint32
	var c uint32
	for s := range a {
		cum[s] = c
		c += freq[s]
	}
	hdr := headerLen + 2*a + 8
	limit := headerLen + len(data) // a record must be shorter than this
	if hdr >= limit {
		return nil
	}
	// The payload is produced back to front into the tail of rec.
	rec := make([]byte, limit)
	pos := limit
	x := [2]uint32{lowBound, lowBound}
	for j := m - 1; j >= 0; j-- {
		var s byte
		if mode == cfs1.ModeByte {
			s = data[j]
		} else {
			s = data[j>>1] >> (4 * (j & 1)) & 15
		}
		f := freq[s]
		v := x[j&1]
		for xmax := (lowBound >> scaleBits << 8) * f; v >= xmax; v >>= 8 {
			if pos == hdr {
				return nil
			}
			pos--
			rec[pos] = byte(v)
		}
		x[j&1] = (v/f)<<scaleBits + v%f + cum[s]
	}
	n := hdr + limit - pos
	if n >= limit {
		return nil
	}
	copy(rec[hdr:], rec[pos:])
	rec = rec[:n:n]
	copy(rec, cfs1.Magic)
	rec[4] = mode
	binary.LittleEndian.PutUint32(rec[5:], uint32(len(data)))
	for s := range a {
		binary.LittleEndian.PutUint16(rec[headerLen+2*s:], uint16(freq[s]))
	}
	binary.LittleEndian.PutUint32(rec[hdr-8:], x[0])
	binary.LittleEndian.PutUint32(rec[hdr-4:], x[1])
	return rec
}
