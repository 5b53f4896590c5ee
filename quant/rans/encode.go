package rans

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/k3-project/k3/quant/cfs1"
)

// Encode returns the CFS1 nibble record (mode 1) of 4-bit weight bytes, or
// a raw record (mode 0) when coding would not make it shorter, so a record
// never exceeds its input by more than 9 bytes. The output depends on data
// only. Every record is decoded by package cfs1's independent decoder and
// compared with data before it is returned.
//
// The frequencies are SPEC §6.9.1's normalisation with ties broken (see
// distinct): where two symbols share a frequency, a bit flip that moves a
// slot to the same offset in the other symbol's range leaves the decoder
// state unchanged, so the seal could not see it. Measured on the released
// MXFP4 sample such flips exist with tied frequencies and none remain
// without ties; the cost is below 0.001 bits per weight. Any CFS1 decoder
// reads the records (only the encoder's choice of frequencies differs).
func Encode(data []byte) ([]byte, error) {
	return encode(data, cfs1.ModeNibble)
}

// EncodeBytes is Encode over byte symbols (mode 2), for E8M0 scale arrays.
// With 256 symbols ties cannot all be broken within a total of 4096, so it
// uses SPEC §6.9.1's normalisation as is.
func EncodeBytes(data []byte) ([]byte, error) {
	return encode(data, cfs1.ModeByte)
}

func encode(data []byte, mode byte) ([]byte, error) {
	if uint64(len(data)) > 1<<32-1 {
		return nil, fmt.Errorf("rans: %d bytes exceed the u32 length field", len(data))
	}
	var rec []byte
	if len(data) > 0 {
		if freq, ok := normalise(data, mode); ok {
			if mode == cfs1.ModeNibble {
				if f, ok := distinct(freq); ok {
					freq = f
				}
			}
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

// symbols calls fn for every symbol of data in order.
func count(data []byte, mode byte) (c [256]int, m int) {
	if mode == cfs1.ModeByte {
		for _, b := range data {
			c[b]++
		}
		return c, len(data)
	}
	for _, b := range data {
		c[b&15]++
		c[b>>4]++
	}
	return c, 2 * len(data)
}

// normalise is SPEC §6.9.1's normaliser: false when the most frequent
// symbol would fall below 1.
func normalise(data []byte, mode byte) (freq [256]uint32, ok bool) {
	c, m := count(data, mode)
	present, top := 0, 0
	for s, v := range c {
		if v > 0 {
			present++
		}
		if v > c[top] {
			top = s
		}
	}
	if present == 1 {
		freq[top] = probScale
		return freq, true
	}
	sum := 0
	for s, v := range c {
		if v == 0 {
			continue
		}
		f := max(v*probScale/m, 1)
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

// distinct makes the present symbols' frequencies pairwise different with
// the smallest changes: in ascending order of (frequency, symbol) each one
// is raised to one above its predecessor if needed, and the most frequent
// symbol (the last) gives back the total raised. It fails, leaving the
// caller with the tied table, when that would not keep the last one
// strictly largest.
func distinct(freq [256]uint32) ([256]uint32, bool) {
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
