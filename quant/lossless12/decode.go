package lossless12

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// Matrix is an encoded [Rows, Cols] matrix that Open has accepted. It
// retains the bytes given to Open; it is safe for concurrent use.
type Matrix struct {
	h    Header
	rb   int    // bytes per row
	rows []byte // the rows, after the header
	// simd selects the assembly decoder, wide its AVX-512 form over the
	// AVX2 one (set at Open from the CPU; tests clear them to run the lower
	// levels and the pure-Go twin).
	simd, wide bool
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
	m := &Matrix{h: h, rb: int(h.RowBytes()), rows: data[HeaderSize:len(data):len(data)], simd: haveAVX2, wide: haveWide}
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
		return &Matrix{h: h, simd: haveAVX2, wide: haveWide}, nil
	}
	if int64(len(data))%rb != 0 || int64(len(data))/rb >= MaxDim {
		return nil, &MalformedError{Row: -1, Block: -1, Reason: fmt.Sprintf("%d bytes is not a whole number of %d-byte rows", len(data), rb)}
	}
	h.Rows = int(int64(len(data)) / rb)
	m := &Matrix{h: h, rb: int(rb), rows: data[:len(data):len(data)], simd: haveAVX2, wide: haveWide}
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
	return &Matrix{h: h, rb: m.rb, rows: m.rows[lo*m.rb : hi*m.rb : hi*m.rb], simd: m.simd, wide: m.wide}
}

// parts splits row r into its four areas.
func (m *Matrix) parts(r int) (bases, sm, idx, esc []byte) {
	return split(m.rows[r*m.rb:(r+1)*m.rb], m.h.Cols)
}

// split splits an encoded row of cols columns into its four areas: the
// window bases, the sign-and-mantissa bytes, the index planes and the
// escape area.
func split(row []byte, cols int) (bases, sm, idx, esc []byte) {
	nb := int(blocks(int64(cols)))
	np := int(planeBytes(int64(cols)))
	return row[:nb:nb], row[nb : nb+cols : nb+cols], row[nb+cols : nb+cols+np : nb+cols+np], row[nb+cols+np:]
}

// blockPlanes returns the index planes of block k, of n columns, from a
// row's index area, and the width of one plane: bit p of column j's index
// is bit j%8 of byte p·w + j/8.
func blockPlanes(idx []byte, k, n int) ([]byte, int) {
	w := (n + 7) / 8
	off := k * IndexBits * BlockSize / 8
	return idx[off : off+IndexBits*w : off+IndexBits*w], w
}

// planeWords reads the planes of a block as one word each, bit j for
// column j.
func planeWords(pl []byte, w int) (p [IndexBits]uint64) {
	for i := range p {
		if w == BlockSize/8 {
			p[i] = binary.LittleEndian.Uint64(pl[i*w:])
			continue
		}
		var b [8]byte
		copy(b[:], pl[i*w:(i+1)*w])
		p[i] = binary.LittleEndian.Uint64(b[:])
	}
	return p
}

// checkRow checks row r and returns how many escapes it uses.
func (m *Matrix) checkRow(r int) (int, error) {
	bases, _, idx, esc := m.parts(r)
	cols := m.h.Cols
	ne, k0 := 0, 0
	if m.simd {
		// The assembly takes the whole blocks up to the first it does not
		// accept, which the loop below checks (and names, if it is a fault).
		k0, ne = checkWhole(idx, bases, esc, cols/BlockSize)
	}
	for k := k0; k < len(bases); k++ {
		n := min(BlockSize, cols-k*BlockSize)
		pl, w := blockPlanes(idx, k, n)
		if n == BlockSize && int(bases[k]) <= MaxBase {
			// The common case inline: a whole block whose escapes (if any) fit the
			// area and lie below the base, and whose base is canonical. Anything
			// else goes to checkBlock, which names the fault.
			b := bases[k]
			p0, p1, p2 := binary.LittleEndian.Uint64(pl), binary.LittleEndian.Uint64(pl[8:]), binary.LittleEndian.Uint64(pl[16:])
			e := bits.OnesCount64(p0 & p1 & p2)
			if (b == 0 && e == 0 || b > 0 && ^p0&p1&p2 != 0) && ne+e <= len(esc) && below(esc[ne:ne+e], b) {
				ne += e
				continue
			}
		}
		var err error
		if ne, err = checkBlock(r, k, int(bases[k]), n, pl, w, esc, ne); err != nil {
			return 0, err
		}
	}
	for i := ne; i < len(esc); i++ {
		if esc[i] != 0 {
			return 0, &MalformedError{Row: r, Block: -1, Reason: fmt.Sprintf("escape byte %d is unused but not zero", i)}
		}
	}
	return ne, nil
}

// below reports whether every byte of e is below b.
func below(e []byte, b byte) bool {
	for _, v := range e {
		if v >= b {
			return false
		}
	}
	return true
}

// checkBlock checks block k of row r, n columns whose index planes pl are
// w bytes wide, ne escapes having been used before it, and returns the
// escapes used after it, or the fault, named. It takes the blocks the fast
// checks of checkRow do not (a short last block, and any block they
// refuse), working on whole plane words as they do.
func checkBlock(r, k, b, n int, pl []byte, w int, esc []byte, ne int) (int, error) {
	if b > MaxBase {
		return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("window base %d above %d", b, MaxBase)}
	}
	p := planeWords(pl, w)
	cover := ^uint64(0) >> (64 - n)
	if pad := (p[0] | p[1] | p[2]) &^ cover; pad != 0 {
		return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("index bit of column %d, after the row's last, is not zero", k*BlockSize+bits.TrailingZeros64(pad))}
	}
	escapes := p[0] & p[1] & p[2]
	for e := escapes; e != 0; e &= e - 1 {
		c := k*BlockSize + bits.TrailingZeros64(e)
		if ne == len(esc) {
			return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("column %d escapes beyond the row's %d escape bytes", c, len(esc))}
		}
		if int(esc[ne]) >= b {
			return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("column %d escapes exponent %d, not below the window base %d", c, esc[ne], b)}
		}
		ne++
	}
	// Escaped exponents lie below the base, so the block's largest exponent
	// is base+6 exactly when a column has index 6; a base of 0 is canonical
	// for any indices (every exponent then is at most 6).
	if top := ^p[0] & p[1] & p[2]; b > 0 && top == 0 {
		emax := 0
		for j := range n {
			ix := int(p[0]>>j&1 | p[1]>>j&1<<1 | p[2]>>j&1<<2)
			if ix != EscapeIndex {
				emax = max(emax, b+ix)
			}
		}
		if emax == 0 { // every column escapes: the largest is among them
			for i := ne - bits.OnesCount64(escapes); i < ne; i++ {
				emax = max(emax, int(esc[i]))
			}
		}
		return 0, &MalformedError{Row: r, Block: k, Reason: fmt.Sprintf("window base %d, the weights' largest exponent %d gives %d", b, emax, canonicalBase(emax))}
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
// byte. The assembly, where the CPU has it, decodes the whole blocks, the
// Go decoder the rest; both write the same bytes.
func (m *Matrix) decodeRow(dst []byte, r int) {
	bases, sm, idx, esc := m.parts(r)
	cols := m.h.Cols
	ne, k0 := 0, 0
	if full := cols / BlockSize; m.simd && full > 0 {
		if n, ok := decodeWhole(dst, sm, idx, bases, esc, full, m.wide); ok {
			ne, k0 = n, full
		}
	}
	for k := k0; k < len(bases); k++ {
		lo := k * BlockSize
		n := min(BlockSize, cols-lo)
		pl, w := blockPlanes(idx, k, n)
		ne = decodeBlock(dst[2*lo:2*(lo+n)], sm[lo:lo+n], pl, w, esc, bases[k], ne)
	}
}

// decodeRows decodes rows [r0, r1) into dst, 2·Cols bytes a row.
func (m *Matrix) decodeRows(dst []byte, r0, r1 int) {
	rb := 2 * m.h.Cols
	for r := r0; r < r1; r++ {
		m.decodeRow(dst[(r-r0)*rb:(r-r0+1)*rb], r)
	}
}

// decodeBlock decodes one block of len(s) columns into dst (2 bytes each),
// given its sign-and-mantissa bytes s, its index planes pl (w bytes each)
// and the row's escape area esc, of which ne bytes are used by earlier
// columns; it returns the new count. Eight columns go at a time, in one
// word: their indices gathered one to a byte, the escaped ones cleared so
// that adding the base to all eight at once carries nowhere, then the
// escapes' bytes put in their place.
func decodeBlock(dst, s, pl []byte, w int, esc []byte, base byte, ne int) int {
	const ones = 0x0101010101010101
	bb := uint64(base) * ones
	p0, p1, p2 := pl[:w:w], pl[w:2*w:2*w], pl[2*w:3*w:3*w]
	for g := range p0 {
		q0, q1, q2 := p0[g], p1[g], p2[g]
		escapes := q0 & q1 & q2
		e8 := (spread(q0)|spread(q1)<<1|spread(q2)<<2)&^(spread(escapes)*EscapeIndex) + bb
		for m := escapes; m != 0; m &= m - 1 {
			sh := 8 * bits.TrailingZeros8(m)
			e8 = e8&^(0xFF<<sh) | uint64(esc[ne])<<sh
			ne++
		}
		if n := len(s) - 8*g; n < 8 {
			for j := range n {
				v := uint16(s[8*g+j])
				binary.LittleEndian.PutUint16(dst[16*g+2*j:], v&0x80<<8|uint16(byte(e8>>(8*j)))<<7|v&0x7F)
			}
			break
		}
		sg := binary.LittleEndian.Uint64(s[8*g:])
		d := dst[16*g : 16*g+16 : 16*g+16]
		binary.LittleEndian.PutUint64(d, codes4(uint32(sg), uint32(e8)))
		binary.LittleEndian.PutUint64(d[8:], codes4(uint32(sg>>32), uint32(e8>>32)))
	}
	return ne
}

// codes4 builds four bf16 codes, s<<15 | e<<7 | m, from four sign-and-
// mantissa bytes sm and four exponents e, one to a byte, lowest first.
func codes4(sm, e uint32) uint64 {
	s, x := widen16(sm), widen16(e)
	return s&0x0080008000800080<<8 | x<<7 | s&0x007F007F007F007F
}

// widen16 moves the four bytes of v to the low bytes of four 16-bit lanes.
func widen16(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000FFFF0000FFFF
	return (x | x<<8) & 0x00FF00FF00FF00FF
}

// spread returns the eight bits of v as the low bits of eight bytes, bit j
// in byte j: each copy of v keeps its own bit, and adding 0x7F to a byte
// sets its top bit exactly when that bit was set (no byte carries, 0x80 +
// 0x7F being 0xFF).
func spread(v byte) uint64 {
	const ones, pick, half = 0x0101010101010101, 0x8040201008040201, 0x7F7F7F7F7F7F7F7F
	return ((uint64(v) * ones & pick) + half) >> 7 & ones
}
