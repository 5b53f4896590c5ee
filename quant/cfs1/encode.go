package cfs1

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Encode returns the CFS1 record of data coded in mode (ModeNibble or
// ModeByte) with the frequencies of Frequencies, or a raw (mode 0) record
// when the model cannot be normalised or
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

// SpecFrequencies returns §6.9.1's frequency table for data coded in
// mode (summing to 4096), or false when the most frequent symbol would fall
// below 1. Encode does not use it as is for nibble records: see Frequencies.
func SpecFrequencies(data []byte, mode byte) (freq [256]uint32, ok bool) {
	m := len(data)
	if mode == ModeNibble {
		m = 2 * len(data)
	}
	if m == 0 {
		return freq, false
	}
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
		f := max(c*probScale/m, 1)
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

// Frequencies is the table Encode codes with: §6.9.1's, with ties
// broken in nibble records (see Distinct). Where two symbols share a
// frequency, a bit flip that moves a slot to the same offset in the other
// symbol's range leaves the decoder state unchanged, so the seal cannot see
// it; on the released MXFP4 sample such flips exist with the tied table and
// none remain without ties, at a cost below 0.001 bits per weight. Byte
// records keep the §6.9.1 table: with 256 symbols the ties cannot all be
// broken within a total of 4096. Any CFS1 decoder reads either.
func Frequencies(data []byte, mode byte) (freq [256]uint32, ok bool) {
	freq, ok = SpecFrequencies(data, mode)
	if ok && mode == ModeNibble {
		if d, ok := Distinct(freq); ok {
			freq = d
		}
	}
	return freq, ok
}

// Distinct makes the present symbols' frequencies pairwise different with
// the smallest changes: in ascending order of (frequency, symbol) each one
// is raised to one above its predecessor if needed, and the most frequent
// symbol (the last) gives back the total raised. It returns freq and false
// when that would not keep the last one strictly largest.
func Distinct(freq [256]uint32) ([256]uint32, bool) {
	var syms []int
	for s, f := range freq {
		if f > 0 {
			syms = append(syms, s)
		}
	}
	if len(syms) < 2 {
		return freq, true
	}
	slices.SortFunc(syms, func(a, b int) int {
		if freq[a] != freq[b] {
			return int(freq[a]) - int(freq[b])
		}
		return a - b
	})
	out := freq
	var raised uint32
	for i := 1; i < len(syms)-1; i++ {
		if p := out[syms[i-1]]; out[syms[i]] <= p {
			raised += p + 1 - out[syms[i]]
			out[syms[i]] = p + 1
		}
	}
	last := syms[len(syms)-1]
	if out[last] <= raised || out[last]-raised <= out[syms[len(syms)-2]] {
		return freq, false
	}
	out[last] -= raised
	return out, true
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
	freq, ok := Frequencies(data, mode)
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
