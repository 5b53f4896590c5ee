package lossless12

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Matrix is an encoded [Rows, Cols] matrix that Open has accepted. It
// retains the bytes given to Open; it is safe for concurrent use.
type Matrix struct {
	h    Header
	rb   int    // bytes per row
	rows []byte // the rows, after the header
	// simd selects the assembly decoder for blocks without escapes, fused
	// the mat-vec that decodes in registers, wide its AVX-512 kernel over
	// the AVX2 one (set at Open from the CPU; tests clear them to run the
	// lower levels and the pure-Go twin).
	simd, fused, wide bool
}

// Open checks every byte of an encoded matrix and returns it: the header,
// each block's window base (the canonical one for its weights), each escape
// (below its window, inside the row's area), the zero padding, and that the
// escape area is exactly as wide as the row with the most escapes needs. Any
// fault is a *MalformedError naming the row and block. data is retained,
// not copied.
func Open(data []byte) (*Matrix, error) {
	h, err := ParseHeader(data)
	if err != nil {
		return nil, err
	}
	m := &Matrix{h: h, rb: int(h.RowBytes()), rows: data[HeaderSize:len(data):len(data)], simd: haveAVX2, fused: haveFused, wide: haveWide}
	most := 0
	for r := range h.Rows {
		if h.Cols == 0 {
			break // empty rows: nothing to check, however many the header claims
		}
		n, err := m.checkRow(r)
		if err != nil {
			return nil, err
		}
		most = max(most, n)
	}
	if most != h.Escapes {
		// A wider area than any row needs decodes fine, but it is not the
		// encoding of these weights, and it wastes bytes on every row.
		return nil, &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("%d escape bytes per row, the rows use at most %d", h.Escapes, most)}
	}
	return m, nil
}

// OpenRows checks and wraps a range of rows of an encoded matrix without
// its header: data holds whole rows of cols columns and escapes escape
// bytes each (the header's numbers, which the caller has checked against
// the whole matrix). It is how a streamed piece of a matrix is opened:
// every block is checked as Open checks it, except that the rows of a
// range may need fewer escape bytes than the area holds.
func OpenRows(cols, escapes int, data []byte) (*Matrix, error) {
	h := Header{Cols: cols, Escapes: escapes}
	if err := h.check(); err != nil {
		return nil, err
	}
	rb := h.RowBytes()
	if rb == 0 {
		if len(data) != 0 {
			return nil, &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("%d bytes of rows of 0 bytes", len(data))}
		}
		return &Matrix{h: h, simd: haveAVX2, fused: haveFused, wide: haveWide}, nil
	}
	if int64(len(data))%rb != 0 || int64(len(data))/rb >= MaxDim {
		return nil, &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("%d bytes is not a whole number of %d-byte rows", len(data), rb)}
	}
	h.Rows = int(int64(len(data)) / rb)
	m := &Matrix{h: h, rb: int(rb), rows: data[:len(data):len(data)], simd: haveAVX2, fused: haveFused, wide: haveWide}
	if err := m.checkRows(); err != nil {
		return nil, err
	}
	return m, nil
}

// checkRows checks every row in order and returns the first fault.
func (m *Matrix) checkRows() error {
	for r := range m.h.Rows {
		if _, err := m.checkRow(r); err != nil {
			return err
		}
	}
	return nil
}

// Header returns the matrix's header.
func (m *Matrix) Header() Header { return m.h }

// Rows returns the number of rows.
func (m *Matrix) Rows() int { return m.h.Rows }

// Cols returns the number of columns.
func (m *Matrix) Cols() int { return m.h.Cols }

// Slice returns rows [lo, hi) as a Matrix sharing m's bytes. It panics when
// the range is out of bounds.
func (m *Matrix) Slice(lo, hi int) *Matrix {
	if lo < 0 || hi < lo || hi > m.h.Rows {
		panic(fmt.Sprintf("lossless12.Slice(%d, %d): out of range for %d rows", lo, hi, m.h.Rows))
	}
	h := m.h
	h.Rows = hi - lo
	return &Matrix{h: h, rb: m.rb, rows: m.rows[lo*m.rb : hi*m.rb : hi*m.rb], simd: m.simd, fused: m.fused, wide: m.wide}
}

// parts splits row r into its four areas.
func (m *Matrix) parts(r int) (bases, sm, nib, esc []byte) {
	cols := m.h.Cols
	nb := int(blocks(int64(cols)))
	row := m.rows[r*m.rb : (r+1)*m.rb]
	return row[:nb], row[nb : nb+cols], row[nb+cols : nb+cols+(cols+1)/2], row[nb+cols+(cols+1)/2:]
}

// checkRow checks row r and returns how many escapes it uses.
func (m *Matrix) checkRow(r int) (int, error) {
	bases, _, nib, esc := m.parts(r)
	cols := m.h.Cols
	full := cols / BlockSize
	ne := 0
	for k := 0; k < len(bases); k++ {
		// Whole blocks without escapes whose base is 0 or whose indices reach the top of the
		// window are canonical, and are checked many indices at a time: this runs on every
		// streamed read of a piece, so it must cost little beside the mat-vec. Any other block
		// (escapes, a fault, the last partial block) takes checkBlock, which names the fault.
		if k < full {
			var j int
			if m.simd {
				j = plainBlocks(nib[k*BlockSize/2:full*BlockSize/2], bases[k:full], full-k, m.rb)
			} else {
				j = plainBlocksGo(nib[k*BlockSize/2:full*BlockSize/2], bases[k:full])
			}
			if k += j; k == len(bases) {
				break
			}
		}
		var err error
		if ne, err = checkBlock(r, k, int(bases[k]), cols, nib, esc, ne); err != nil {
			return 0, err
		}
	}
	if cols%2 == 1 && nib[len(nib)-1]>>4 != 0 {
		return 0, &MalformedError{Row: r, Block: -1, Reason: "padding nibble after the last column is not zero"}
	}
	for i := ne; i < len(esc); i++ {
		if esc[i] != 0 {
			return 0, &MalformedError{Row: r, Block: -1, Reason: fmt.Sprintf("escape byte %d is unused but not zero", i)}
		}
	}
	return ne, nil
}

// Nibble masks of plainBlock.
const (
	nibbleLow3 = 0x7777777777777777
	nibbleOne  = 0x1111111111111111
	nibbleTop  = 0x8888888888888888
)

// plainBlocksGo returns how many of the blocks from nib and bases (one base each) plainBlock
// accepts before the first it does not.
func plainBlocksGo(nib, bases []byte) int {
	for k, b := range bases {
		if b > MaxBase || !plainBlock(nib[k*BlockSize/2:(k+1)*BlockSize/2], b) {
			return k
		}
	}
	return len(bases)
}

// plainBlock reports whether the BlockSize/2 index bytes of one block hold no escape index and,
// for a base above 0, at least one index 14 (EscapeIndex-1): then the block's largest exponent is
// base+14 and the base is the canonical one. It does not say why a block fails.
//
// A nibble n is 15 exactly when (n&7)+1 carries into its top bit while that bit is set; the add
// never carries into the next nibble. n is 14 exactly when n^1 is 15.
func plainBlock(nib []byte, base byte) bool {
	nib = nib[:BlockSize/2]
	var escapes, top uint64
	for i := 0; i < BlockSize/2; i += 8 {
		w := binary.LittleEndian.Uint64(nib[i : i+8])
		escapes |= ((w & nibbleLow3) + nibbleOne) & w
		x := w ^ nibbleOne
		top |= ((x & nibbleLow3) + nibbleOne) & x
	}
	return escapes&nibbleTop == 0 && (base == 0 || top&nibbleTop != 0)
}

// checkBlock checks block k of row r column by column, ne escapes having been used before it,
// and returns the escapes used after it.
func checkBlock(r, k, b, cols int, nib, esc []byte, ne int) (int, error) {
	if b > MaxBase {
		return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("window base %d above %d", b, MaxBase)}
	}
	emax := 0
	for c := k * BlockSize; c < min((k+1)*BlockSize, cols); c++ {
		idx := int(nib[c/2]>>(4*(c&1))) & 0xF
		e := b + idx
		if idx == EscapeIndex {
			if ne == len(esc) {
				return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("column %d escapes beyond the row's %d escape bytes", c, len(esc))}
			}
			e = int(esc[ne])
			ne++
			if e >= b {
				return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("column %d escapes exponent %d, not below the window base %d", c, e, b)}
			}
		}
		emax = max(emax, e)
	}
	if want := canonicalBase(emax); b != want {
		return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("window base %d, the weights' largest exponent %d gives %d", b, emax, want)}
	}
	return ne, nil
}

// DecodeRowBF16 writes row r as little-endian bf16 bytes into dst
// (len(dst) = 2·Cols): exactly the bytes Encode was given.
func (m *Matrix) DecodeRowBF16(dst []byte, r int) {
	if r < 0 || r >= m.h.Rows || len(dst) != 2*m.h.Cols {
		panic(fmt.Sprintf("lossless12.DecodeRowBF16: row %d of %d, len(dst)=%d want %d", r, m.h.Rows, len(dst), 2*m.h.Cols))
	}
	m.decodeRow(dst, r)
}

// DecodeRow writes row r widened to float32 into dst (len(dst) = Cols),
// the value §5.1 gives each bf16 code.
func (m *Matrix) DecodeRow(dst []float32, r int) {
	if r < 0 || r >= m.h.Rows || len(dst) != m.h.Cols {
		panic(fmt.Sprintf("lossless12.DecodeRow: row %d of %d, len(dst)=%d want %d", r, m.h.Rows, len(dst), m.h.Cols))
	}
	p := getScratch(2 * m.h.Cols)
	buf := *p
	m.decodeRow(buf, r)
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(buf[2*i:])) << 16)
	}
	scratch.Put(p)
}

// decodeRow is the decoder every kernel runs: Open has checked the row, so
// every index names an exponent inside the byte and every escape has its
// byte. With AVX-512 the assembly decodes every whole block; otherwise a
// whole block without escapes (nearly all of them) takes a fast path: the
// AVX2 decoder where the CPU has one, else its pure-Go twin,
// which looks the 15 exponents up in a table, two weights per index byte;
// the rest go weight by weight. Every path writes the same bytes.
func (m *Matrix) decodeRow(dst []byte, r int) {
	bases, sm, nib, esc := m.parts(r)
	cols := m.h.Cols
	ne, k0 := 0, 0
	if m.simd && m.wide {
		// The AVX-512 decoder takes every whole block, escapes included.
		k0, ne = decodeRowsWide(m.rows[r*m.rb:(r+1)*m.rb], 1, m.h, dst)
	}
	var tab [16]uint16
	full := cols / BlockSize
	for k := k0; k < len(bases); k++ {
		if m.simd && k < full {
			// The assembly decodes the whole blocks up to the next escape.
			k += decodeBlocks(dst[2*k*BlockSize:], sm[k*BlockSize:], nib[k*BlockSize/2:], bases[k:], full-k)
			if k == len(bases) {
				break
			}
		}
		bb := bases[k]
		lo, hi := k*BlockSize, min((k+1)*BlockSize, cols)
		if hi-lo == BlockSize {
			nb := nib[lo/2 : lo/2+BlockSize/2 : lo/2+BlockSize/2]
			if !anyEscape(nb) {
				for i := range uint16(Window) {
					tab[i] = (uint16(bb) + i) << 7
				}
				s := sm[lo : lo+BlockSize : lo+BlockSize]
				d := dst[2*lo : 2*lo+2*BlockSize : 2*lo+2*BlockSize]
				for j, ix := range nb {
					v0, v1 := uint32(s[2*j]), uint32(s[2*j+1])
					w0 := (v0&0x80)<<8 | uint32(tab[ix&0xF]) | v0&0x7F
					w1 := (v1&0x80)<<8 | uint32(tab[ix>>4]) | v1&0x7F
					binary.LittleEndian.PutUint32(d[4*j:], w0|w1<<16)
				}
				continue
			}
		}
		ne = decodeSlow(dst[2*lo:2*hi], sm[lo:hi], nib, lo, esc, bb, ne)
	}
}

// decodeRows decodes rows [r0, r1) into dst, 2·Cols bytes a row, as
// decodeRow does each; rows of whole blocks take one call into the AVX-512
// decoder for all of them.
func (m *Matrix) decodeRows(dst []byte, r0, r1 int) {
	rb := 2 * m.h.Cols
	if m.simd && m.wide && m.h.Cols%BlockSize == 0 && r1-r0 > 1 {
		if k, _ := decodeRowsWide(m.rows[r0*m.rb:r1*m.rb], r1-r0, m.h, dst); k > 0 {
			return
		}
	}
	for r := r0; r < r1; r++ {
		m.decodeRow(dst[(r-r0)*rb:(r-r0+1)*rb], r)
	}
}

// decodeSlow decodes columns lo … lo+len(s)−1 of a row weight by weight
// into dst (2 bytes each), given the row's index bytes nib and escape area
// esc, of which ne bytes are used by earlier columns; it returns the new
// count.
func decodeSlow(dst, s, nib []byte, lo int, esc []byte, base byte, ne int) int {
	b := uint16(base)
	for j, v := range s {
		c := lo + j
		idx := uint16(nib[c/2]>>(4*(c&1))) & 0xF
		e := b + idx
		if idx == EscapeIndex {
			e = uint16(esc[ne])
			ne++
		}
		binary.LittleEndian.PutUint16(dst[2*j:], uint16(v&0x80)<<8|e<<7|uint16(v&0x7F))
	}
	return ne
}

// anyEscape reports whether any of the 64 index nibbles in nb (32 bytes) is
// EscapeIndex: a nibble is 15 exactly when its four bits are set.
func anyEscape(nb []byte) bool {
	const ones = 0x1111111111111111
	var acc uint64
	for i := 0; i+8 <= len(nb); i += 8 {
		v := binary.LittleEndian.Uint64(nb[i:])
		acc |= v & (v >> 1) & (v >> 2) & (v >> 3) & ones
	}
	return acc != 0
}
