package lossless12

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Stats describes what the format makes of one bf16 matrix.
type Stats struct {
	Rows, Cols int
	// Bytes is the encoded size, header included; BF16Bytes is 2·Rows·Cols.
	Bytes, BF16Bytes int64
	// Escapes counts the weights whose exponent lies below their block's
	// window; MaxRowEscapes is the most in one row, the escape bytes every
	// row carries.
	Escapes       int64
	MaxRowEscapes int
	// ExponentEntropy is the order-0 entropy of the 8-bit exponents, in
	// bits per weight: what an ideal entropy coder of the exponents alone
	// would spend, against the 4 bits of an index here.
	ExponentEntropy float64
}

// Weights returns Rows·Cols.
func (s Stats) Weights() int64 { return int64(s.Rows) * int64(s.Cols) }

// BitsPerWeight returns 8·Bytes / Weights (0 for an empty matrix).
func (s Stats) BitsPerWeight() float64 {
	if s.Weights() == 0 {
		return 0
	}
	return 8 * float64(s.Bytes) / float64(s.Weights())
}

// Ratio returns Bytes / BF16Bytes: below 1 the format saves bytes.
func (s Stats) Ratio() float64 {
	if s.BF16Bytes == 0 {
		return 0
	}
	return float64(s.Bytes) / float64(s.BF16Bytes)
}

// EscapeRate returns Escapes / Weights.
func (s Stats) EscapeRate() float64 {
	if s.Weights() == 0 {
		return 0
	}
	return float64(s.Escapes) / float64(s.Weights())
}

func (s Stats) String() string {
	return fmt.Sprintf("[%d, %d] %.3f bits/weight (%.4f× bf16), escapes %d (%.4f%%, ≤ %d per row), exponent entropy %.3f bits",
		s.Rows, s.Cols, s.BitsPerWeight(), s.Ratio(), s.Escapes, 100*s.EscapeRate(), s.MaxRowEscapes, s.ExponentEntropy)
}

// Measure returns the statistics of the [rows, cols] matrix of
// little-endian bf16 weights w without encoding it: one pass, no
// allocation proportional to the matrix.
func Measure(rows, cols int, w []byte) (Stats, error) {
	if rows < 0 || rows >= MaxDim || cols < 0 || cols >= MaxDim {
		return Stats{}, fmt.Errorf("%w: [%d, %d] outside [0, 2^31)", ErrShape, rows, cols)
	}
	if int64(len(w)) != 2*int64(rows)*int64(cols) {
		return Stats{}, fmt.Errorf("%w: [%d, %d] bf16 needs %d bytes, got %d", ErrShape, rows, cols, 2*int64(rows)*int64(cols), len(w))
	}
	s := Stats{Rows: rows, Cols: cols, BF16Bytes: int64(len(w))}
	var hist [256]int64
	rb := 2 * cols
	for r := range rows {
		row := w[r*rb : (r+1)*rb]
		e := rowEscapes(row)
		s.Escapes += int64(e)
		s.MaxRowEscapes = max(s.MaxRowEscapes, e)
		for i := 0; i < len(row); i += 2 {
			hist[exponent(binary.LittleEndian.Uint16(row[i:]))]++
		}
	}
	s.Bytes = Header{Rows: rows, Cols: cols, Escapes: s.MaxRowEscapes}.Size()
	if n := float64(s.Weights()); n > 0 {
		for _, c := range hist {
			if c > 0 {
				p := float64(c) / n
				s.ExponentEntropy -= p * math.Log2(p)
			}
		}
	}
	return s, nil
}
