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
// little-endian bf16 weights w without encoding it.
func Measure(rows, cols int, w []byte) (Stats, error) {
	if rows < 0 || rows >= MaxDim || cols < 0 || cols >= MaxDim {
		return Stats{}, fmt.Errorf("%w: [%d, %d] outside [0, 2^31)", ErrShape, rows, cols)
	}
	if int64(len(w)) != 2*int64(rows)*int64(cols) {
		return Stats{}, fmt.Errorf("%w: [%d, %d] bf16 needs %d bytes, got %d", ErrShape, rows, cols, 2*int64(rows)*int64(cols), len(w))
	}
	mt, err := NewMeter(cols)
	if err != nil {
		return Stats{}, err
	}
	if err := mt.Add(w); err != nil {
		return Stats{}, err
	}
	return mt.Stats(), nil
}

// Meter accumulates the statistics of a matrix whose bf16 rows arrive in
// pieces (a tensor read a few megabytes at a time), so that measuring a
// matrix never needs it whole in memory. The zero Meter is not usable; call
// NewMeter.
type Meter struct {
	cols int
	s    Stats
	hist [256]int64
}

// NewMeter returns a Meter for rows of cols weights.
func NewMeter(cols int) (*Meter, error) {
	if cols < 0 || cols >= MaxDim {
		return nil, fmt.Errorf("%w: %d columns outside [0, 2^31)", ErrShape, cols)
	}
	return &Meter{cols: cols, s: Stats{Cols: cols}}, nil
}

// Add takes whole rows of little-endian bf16 weights (len(w) a multiple of
// 2·cols).
func (mt *Meter) Add(w []byte) error {
	rb := 2 * mt.cols
	if rb == 0 {
		if len(w) != 0 {
			return fmt.Errorf("%w: %d bytes for rows of 0 columns", ErrShape, len(w))
		}
		return nil
	}
	if len(w)%rb != 0 {
		return fmt.Errorf("%w: %d bytes is not a whole number of %d-byte rows", ErrShape, len(w), rb)
	}
	if mt.s.Rows+len(w)/rb >= MaxDim {
		return fmt.Errorf("%w: more than 2^31 rows", ErrShape)
	}
	for lo := 0; lo < len(w); lo += rb {
		row := w[lo : lo+rb]
		e := rowEscapes(row)
		mt.s.Escapes += int64(e)
		mt.s.MaxRowEscapes = max(mt.s.MaxRowEscapes, e)
		for i := 0; i < len(row); i += 2 {
			mt.hist[exponent(binary.LittleEndian.Uint16(row[i:]))]++
		}
	}
	mt.s.Rows += len(w) / rb
	return nil
}

// Stats returns the statistics of the rows added so far.
func (mt *Meter) Stats() Stats {
	s := mt.s
	s.BF16Bytes = 2 * s.Weights()
	s.Bytes = Header{Rows: s.Rows, Cols: s.Cols, Escapes: s.MaxRowEscapes}.Size()
	if n := float64(s.Weights()); n > 0 {
		for _, c := range mt.hist {
			if c > 0 {
				p := float64(c) / n
				s.ExponentEntropy -= p * math.Log2(p)
			}
		}
	}
	return s
}
