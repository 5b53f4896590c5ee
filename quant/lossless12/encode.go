package lossless12

import (
	"encoding/binary"
	"fmt"
)

// Encode returns the encoding of the [rows, cols] matrix of little-endian
// bf16 weights w (len(w) = 2·rows·cols). It is lossless for every bf16
// code, ±0, subnormals, ±Inf and every NaN payload included, and
// deterministic: the same weights always give the same bytes.
func Encode(rows, cols int, w []byte) ([]byte, error) {
	if rows < 0 || rows >= MaxDim || cols < 0 || cols >= MaxDim {
		return nil, fmt.Errorf("%w: [%d, %d] outside [0, 2^31)", ErrShape, rows, cols)
	}
	if int64(len(w)) != 2*int64(rows)*int64(cols) {
		return nil, fmt.Errorf("%w: [%d, %d] bf16 needs %d bytes, got %d", ErrShape, rows, cols, 2*int64(rows)*int64(cols), len(w))
	}
	h := Header{Rows: rows, Cols: cols}
	rb := 2 * cols
	for r := range rows {
		h.Escapes = max(h.Escapes, rowEscapes(w[r*rb:(r+1)*rb]))
	}
	out := make([]byte, h.Size())
	h.put(out)
	n := int(h.RowBytes())
	for r := range rows {
		encodeRow(out[HeaderSize+r*n:HeaderSize+(r+1)*n], w[r*rb:(r+1)*rb], h)
	}
	return out, nil
}

func exponent(v uint16) int { return int(v>>7) & 0xFF }

// blockBase returns the window base of one block of bf16 weights.
func blockBase(w []byte) int {
	emax := 0
	for i := 0; i < len(w); i += 2 {
		emax = max(emax, exponent(binary.LittleEndian.Uint16(w[i:])))
	}
	return canonicalBase(emax)
}

// rowEscapes counts the weights of a bf16 row that fall below their block's
// window.
func rowEscapes(w []byte) int {
	n := 0
	for lo := 0; lo < len(w); lo += 2 * BlockSize {
		blk := w[lo:min(lo+2*BlockSize, len(w))]
		b := blockBase(blk)
		for i := 0; i < len(blk); i += 2 {
			if exponent(binary.LittleEndian.Uint16(blk[i:])) < b {
				n++
			}
		}
	}
	return n
}

// encodeRow writes one row: bases, sign-and-mantissa bytes, index planes,
// escape bytes in column order, zero padding.
func encodeRow(dst, w []byte, h Header) {
	cols := h.Cols
	bases, sm, idx, esc := split(dst, cols)
	ne := 0
	for k := range bases {
		lo, hi := k*BlockSize, min((k+1)*BlockSize, cols)
		b := blockBase(w[2*lo : 2*hi])
		bases[k] = byte(b)
		pl, pw := blockPlanes(idx, k, hi-lo)
		for c := lo; c < hi; c++ {
			v := binary.LittleEndian.Uint16(w[2*c:])
			sm[c] = byte(v>>8)&0x80 | byte(v)&0x7F
			e := exponent(v)
			ix := e - b
			if ix < 0 {
				ix = EscapeIndex
				esc[ne] = byte(e)
				ne++
			}
			j := c - lo
			for p := range IndexBits {
				pl[p*pw+j/8] |= byte(ix>>p&1) << (j % 8)
			}
		}
	}
}
