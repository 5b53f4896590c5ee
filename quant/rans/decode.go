package rans

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/k3-project/k3/quant/cfs1"
)

// Record constants of §6.9.1 (shared with package cfs1).
const (
	headerLen = 9       // magic, mode, rawlen
	scaleBits = 12      // probability resolution
	probScale = 1 << 12 // Σ freq
	lowBound  = 1 << 23 // L: states live in [L, 2^31)
	stateMax  = 1 << 31
)

// Sentinel errors. Every decode error matches ErrCorrupt, ErrTooLarge or
// ErrLength; the first two are package cfs1's, so callers may test either.
var (
	ErrCorrupt  = cfs1.ErrCorrupt
	ErrTooLarge = cfs1.ErrTooLarge
	// ErrLength reports a record whose decoded length is not the
	// destination's length: a slot has exactly one right size.
	ErrLength = errors.New("rans: decoded length differs from the destination")
)

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...)
}

// Decoder decodes CFS1 records. It holds the 20 KiB slot tables, so a
// long-lived Decoder per worker keeps them off the stack; the zero value is
// ready. A Decoder is not safe for concurrent use.
type Decoder struct {
	// For the symbol s owning a slot: tab[slot] = freq_s<<16 | (slot−cum_s),
	// one load for the state update, and sym[slot] = s, off the state's
	// dependency chain.
	tab [probScale]uint32
	sym [probScale]byte
}

// DecodedLen returns the decoded byte count a whole record declares, after
// the header checks of §6.9.1 that need no decoding (magic, mode, raw
// record length, minimum coded header). Inspect gets the same figure for a
// stored tensor from its first 9 bytes.
func DecodedLen(record []byte) (int, error) {
	_, n, err := cfs1.Header(record)
	return n, err
}

// DecodeInto decodes record into dst using a Decoder on the stack (20 KiB
// of stack; a loader that decodes often keeps one Decoder per goroutine).
func DecodeInto(dst, record []byte) error {
	var d Decoder
	return d.DecodeInto(dst, record)
}

// DecodeInto decodes record into dst, which must be exactly the declared
// decoded length (ErrTooLarge when the record declares more, ErrLength when
// less). It accepts only a record that decodes exactly: payload consumed to
// the last byte and both final states equal to L (the seal); otherwise
// ErrCorrupt, and dst may hold partial output. It never reads past record
// or writes past dst, and allocates nothing unless it fails.
func (d *Decoder) DecodeInto(dst, record []byte) error {
	mode, n, err := cfs1.Header(record)
	if err != nil {
		return err
	}
	if n > len(dst) {
		return fmt.Errorf("%w: record declares %d bytes, destination holds %d", ErrTooLarge, n, len(dst))
	}
	if n < len(dst) {
		return fmt.Errorf("%w: record declares %d bytes, destination holds %d", ErrLength, n, len(dst))
	}
	if mode == cfs1.ModeRaw {
		copy(dst, record[headerLen:])
		return nil
	}
	a := 16
	if mode == cfs1.ModeByte {
		a = 256
	}
	if err := d.build(record[headerLen:headerLen+2*a], a); err != nil {
		return err
	}
	p := headerLen + 2*a
	xa := binary.LittleEndian.Uint32(record[p:])
	xb := binary.LittleEndian.Uint32(record[p+4:])
	if xa < lowBound || xa >= stateMax {
		return corrupt("initial state A = %#x outside [2^23, 2^31)", xa)
	}
	if xb < lowBound || xb >= stateMax {
		return corrupt("initial state B = %#x outside [2^23, 2^31)", xb)
	}
	payload := record[p+8:]
	var pos int
	if mode == cfs1.ModeNibble {
		xa, xb, pos, err = d.nibbles(dst, payload, xa, xb)
	} else {
		xa, xb, pos, err = d.bytes(dst, payload, xa, xb)
	}
	if err != nil {
		return err
	}
	if pos != len(payload) {
		return corrupt("%d payload bytes left after the last symbol", len(payload)-pos)
	}
	if xa != lowBound || xb != lowBound {
		return corrupt("seal broken: final states %#x, %#x, want %#x", xa, xb, uint32(lowBound))
	}
	return nil
}

// build fills the slot table from the a little-endian u16 frequencies,
// refusing a sum other than 4096 before it writes any slot.
func (d *Decoder) build(freqs []byte, a int) error {
	var sum uint32
	for s := range a {
		sum += uint32(binary.LittleEndian.Uint16(freqs[2*s:]))
	}
	if sum != probScale {
		return corrupt("frequencies sum to %d, want %d", sum, probScale)
	}
	var cum uint32
	for s := range a {
		f := uint32(binary.LittleEndian.Uint16(freqs[2*s:]))
		for k := range f {
			d.tab[(cum+k)&(probScale-1)] = f<<16 | k
			d.sym[(cum+k)&(probScale-1)] = byte(s)
		}
		cum += f
	}
	return nil
}

// step is one decode step of §6.9.1 without renormalisation.
func (d *Decoder) step(x uint32) (uint32, byte) {
	slot := x & (probScale - 1)
	e := d.tab[slot]
	return (e>>16)*(x>>scaleBits) + e&0xffff, d.sym[slot]
}

// need is the number of payload bytes (0, 1 or 2) that renormalise x: after a
// step x ≥ 2^11, so two bytes always reach L.
func need(x uint32) uint32 {
	return b2u(x < lowBound) + b2u(x < lowBound>>8)
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// refill is the bounds-checked renormalisation used near the payload's end.
func refill(x uint32, payload []byte, pos *int, j int) (uint32, error) {
	for x < lowBound {
		if *pos >= len(payload) {
			return 0, corrupt("payload exhausted at symbol %d", j)
		}
		x = x<<8 | uint32(payload[*pos])
		*pos++
	}
	return x, nil
}

// nibbles decodes 2·len(dst) nibble symbols. While at least 4 payload bytes
// remain (the most one output byte can consume) the loop renormalises
// without branches from one big-endian word; the tail checks every byte.
func (d *Decoder) nibbles(dst, payload []byte, xa, xb uint32) (uint32, uint32, int, error) {
	pos, i := 0, 0
	for ; i < len(dst) && len(payload)-pos >= 4; i++ {
		w := binary.BigEndian.Uint32(payload[pos:])
		var lo, hi byte
		xa, lo = d.step(xa)
		ka := need(xa)
		xa = xa<<(8*ka&31) | uint32(uint64(w)>>((32-8*ka)&63))
		w <<= 8 * ka & 31
		xb, hi = d.step(xb)
		kb := need(xb)
		xb = xb<<(8*kb&31) | uint32(uint64(w)>>((32-8*kb)&63))
		pos += int(ka + kb)
		dst[i] = lo | hi<<4
	}
	var err error
	for ; i < len(dst); i++ {
		var lo, hi byte
		xa, lo = d.step(xa)
		if xa, err = refill(xa, payload, &pos, 2*i); err != nil {
			return 0, 0, 0, err
		}
		xb, hi = d.step(xb)
		if xb, err = refill(xb, payload, &pos, 2*i+1); err != nil {
			return 0, 0, 0, err
		}
		dst[i] = lo | hi<<4
	}
	return xa, xb, pos, nil
}

// bytes decodes len(dst) byte symbols, alternating states A and B.
func (d *Decoder) bytes(dst, payload []byte, xa, xb uint32) (uint32, uint32, int, error) {
	pos, i := 0, 0
	for ; i+1 < len(dst) && len(payload)-pos >= 4; i += 2 {
		w := binary.BigEndian.Uint32(payload[pos:])
		var s0, s1 byte
		xa, s0 = d.step(xa)
		ka := need(xa)
		xa = xa<<(8*ka&31) | uint32(uint64(w)>>((32-8*ka)&63))
		w <<= 8 * ka & 31
		xb, s1 = d.step(xb)
		kb := need(xb)
		xb = xb<<(8*kb&31) | uint32(uint64(w)>>((32-8*kb)&63))
		pos += int(ka + kb)
		dst[i], dst[i+1] = s0, s1
	}
	var err error
	for ; i < len(dst); i++ {
		x := &xa
		if i&1 == 1 {
			x = &xb
		}
		var s byte
		*x, s = d.step(*x)
		if *x, err = refill(*x, payload, &pos, i); err != nil {
			return 0, 0, 0, err
		}
		dst[i] = s
	}
	return xa, xb, pos, nil
}
