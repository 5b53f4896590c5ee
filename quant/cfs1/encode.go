package cfs1

import (
	"encoding/binary"
	"fmt"
)

// Encode returns the CFS1 record of data coded in mode (ModeNibble or
// ModeByte), or a raw (mode 0) record when the model cannot be normalised or
// the coded record would not be shorter than the raw one, so the output
// never exceeds the input by more than 9 bytes. The output is a function of
// (data, mode) only. Every record is decoded again and compared with data
// before it is returned.
func Encode(data []byte, mode byte) ([]byte, error) {
	if mode != ModeNibble && mode != ModeByte {
		return nil, fmt.Errorf("%w: %d", ErrMode, mode)
	}
	if uint64(len(data)) > 1<<32-1 {
		return nil, fmt.Errorf("cfs1: %d bytes exceed the u32 length field", len(data))
	}
	rec := encodeCoded(data, mode)
	if rec == nil || len(rec) >= headerLen+len(data) {
		rec = raw(data)
	}
	back := make([]byte, len(data))
	if n, err := DecodeInto(back, rec); err != nil || n != len(data) || string(back) != string(data) {
		return nil, fmt.Errorf("cfs1: internal error: record does not decode to its input (%v)", err)
	}
	return rec, nil
}

func raw(data []byte) []byte {
	rec := make([]byte, headerLen+len(data))
	copy(rec, Magic)
	rec[4] = ModeRaw
	binary.LittleEndian.PutUint32(rec[5:], uint32(len(data)))
	copy(rec[headerLen:], data)
	return rec
}

func symbolAt(data []byte, mode byte, j int) uint8 {
	if mode == ModeByte {
		return data[j]
	}
	return data[j>>1] >> (4 * (j & 1)) & 15
}

// normalise returns frequencies summing to 4096 (SPEC §6.9.1), or false when
// the most frequent symbol would fall below 1.
func normalise(data []byte, mode byte, m int) (freq [256]uint32, ok bool) {
	var count [256]int
	for j := range m {
		count[symbolAt(data, mode, j)]++
	}
	present, top := 0, 0
	for s, c := range count {
		if c > 0 {
			present++
		}
		if c > count[top] {
			top = s
		}
	}
	if present == 1 {
		freq[top] = probScale
		return freq, true
	}
	sum := 0
	for s, c := range count {
		if c == 0 {
			continue
		}
		f := c * probScale / m
		if f < 1 {
			f = 1
		}
		freq[s] = uint32(f)
		sum += f
	}
	adj := int(freq[top]) + probScale - sum
	if adj < 1 {
		return freq, false
	}
	freq[top] = uint32(adj)
	return freq, true
}

// encodeCoded returns the coded record or nil when normalisation fails.
func encodeCoded(data []byte, mode byte) []byte {
	n := len(data)
	if n == 0 {
		return nil
	}
	m := n
	if mode == ModeNibble {
		m = 2 * n
	}
	freq, ok := normalise(data, mode, m)
	if !ok {
		return nil
	}
	a := alphabet(mode)
	var cum [256]uint32
	var c uint32
	for s := range a {
		cum[s] = c
		c += freq[s]
	}
	// Bytes are produced back to front; out grows and is reversed at the end.
	out := make([]byte, 0, n/2+16)
	x := [2]uint32{lowBound, lowBound}
	for j := m - 1; j >= 0; j-- {
		s := symbolAt(data, mode, j)
		f := freq[s]
		v := x[j&1]
		for limit := uint64(lowBound>>scaleBits) << 8 * uint64(f); uint64(v) >= limit; v >>= 8 {
			out = append(out, byte(v))
		}
		v = (v/f)<<scaleBits + v%f + cum[s]
		x[j&1] = v
	}
	hdr := headerLen + 2*a + 8
	rec := make([]byte, hdr+len(out))
	copy(rec, Magic)
	rec[4] = mode
	binary.LittleEndian.PutUint32(rec[5:], uint32(n))
	for s := range a {
		binary.LittleEndian.PutUint16(rec[headerLen+2*s:], uint16(freq[s]))
	}
	binary.LittleEndian.PutUint32(rec[hdr-8:], x[0])
	binary.LittleEndian.PutUint32(rec[hdr-4:], x[1])
	for i, b := range out {
		rec[len(rec)-1-i] = b
	}
	return rec
}
