package lossless12

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sample is a [2, 65] matrix whose layout the mutations below address:
// row 0 is 1.0 everywhere but column 3, 2^−40, which escapes; row 1 is all
// 1.0 and leaves its one escape byte unused. Rows are 101 bytes: bases at
// 0–1, sign-and-mantissa at 2–66, nibbles at 67–99, the escape at 100.
func sample(t *testing.T) []byte {
	t.Helper()
	codes := make([]uint16, 2*65)
	for i := range codes {
		codes[i] = 0x3F80
	}
	codes[3] = 0x2B80 // 2^−40: exponent 87, below the window [113, 127]
	enc, err := Encode(2, 65, bf16Bytes(codes))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := ParseHeader(enc); h.Escapes != 1 || h.RowBytes() != 101 {
		t.Fatalf("sample header %+v, row %d bytes: the mutations below assume 1 escape and 101", h, h.RowBytes())
	}
	return enc
}

const row0, row1 = HeaderSize, HeaderSize + 101

// widen gives every row of the sample a second, unused escape byte.
func widen(b []byte) []byte {
	out := append([]byte(nil), b[:HeaderSize]...)
	binary.LittleEndian.PutUint32(out[12:], 2)
	out = append(append(out, b[row0:row1]...), 0)
	return append(append(out, b[row1:]...), 0)
}

func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mutate     func([]byte) []byte
		row, block int
		reason     string
	}{
		{"short", func(b []byte) []byte { return b[:HeaderSize-1] }, -1, -1, "shorter than"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, -1, -1, "magic"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, -1, -1, "needs"},
		{"truncated row", func(b []byte) []byte { return b[:len(b)-1] }, -1, -1, "needs"},
		{"escape area wider than any row needs", widen, -1, -1, "use at most 1"},
		{"escape area wider than the row", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 66); return b }, -1, -1, "escape bytes per row"},
		{"huge shape", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1<<31); return b }, -1, -1, "outside"},
		{"base above 241", func(b []byte) []byte { b[row0] = 242; return b }, 0, 0, "above 241"},
		// The same weight (2^0) as base 114 + index 13 instead of 113 + 14.
		{"base not canonical", func(b []byte) []byte { b[row1+1] = 114; b[row1+99] = b[row1+99]&0xF0 | 13; return b }, 1, 1, "largest exponent"},
		{"escape beyond the area", func(b []byte) []byte { b[row0+67+2] |= 0xF0; return b }, 0, 0, "beyond the row's 1 escape bytes"},
		{"escape inside the window", func(b []byte) []byte { b[row0+100] = 113; return b }, 0, 0, "not below the window base"},
		{"escape above the window", func(b []byte) []byte { b[row0+100] = 200; return b }, 0, 0, "not below the window base"},
		{"padding nibble", func(b []byte) []byte { b[row1+99] |= 0x10; return b }, 1, -1, "padding nibble"},
		{"unused escape byte", func(b []byte) []byte { b[row1+100] = 5; return b }, 1, -1, "unused but not zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := tc.mutate(sample(t))
			_, err := Open(enc)
			var me *MalformedError
			if !errors.Is(err, ErrMalformed) || !errors.As(err, &me) {
				t.Fatalf("Open = %v, want a *MalformedError", err)
			}
			if me.Row != tc.row || me.Block != tc.block || !strings.Contains(me.Reason, tc.reason) {
				t.Fatalf("Open = %v (row %d block %d), want row %d block %d and %q", err, me.Row, me.Block, tc.row, tc.block, tc.reason)
			}
		})
	}
	if _, err := Open(sample(t)); err != nil {
		t.Fatalf("the unmutated sample: %v", err)
	}
}

// TestBitFlips flips every bit of an encoded matrix: each flip is either
// refused or, since every matrix has exactly one encoding, decodes to
// different weights — never to the same weights from other bytes.
func TestBitFlips(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	w := gaussianBF16(r, 3, 130, 0.02)
	binary.LittleEndian.PutUint16(w[10:], 0)       // a zero, which escapes
	binary.LittleEndian.PutUint16(w[300:], 0x7FC0) // a NaN, which widens its window to the top
	enc, err := Encode(3, 130, w)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := HeaderSize; i < len(enc); i++ {
		for bit := range 8 {
			enc[i] ^= 1 << bit
			m, err := Open(enc)
			if err != nil {
				refused++
			} else {
				again, err := Encode(3, 130, decodeAll(m))
				if err != nil || !bytes.Equal(again, enc) {
					t.Fatalf("byte %d bit %d: accepted bytes that are not the encoding of what they decode to", i, bit)
				}
			}
			enc[i] ^= 1 << bit
		}
	}
	t.Logf("%d of %d body bit flips refused", refused, 8*(len(enc)-HeaderSize))
	if refused == 0 {
		t.Fatal("no flip refused")
	}
}

func decodeAll(m *Matrix) []byte {
	out := make([]byte, 2*m.Rows()*m.Cols())
	for r := range m.Rows() {
		m.DecodeRowBF16(out[2*r*m.Cols():2*(r+1)*m.Cols()], r)
	}
	return out
}

// TestOpenRows opens row ranges of an encoded matrix without its header:
// every range decodes as the whole matrix does, and a malformed block or a
// part row is refused.
func TestOpenRows(t *testing.T) {
	enc := sample(t)
	h, _ := ParseHeader(enc)
	whole, err := Open(enc)
	if err != nil {
		t.Fatal(err)
	}
	rb := int(h.RowBytes())
	for lo := 0; lo <= h.Rows; lo++ {
		for hi := lo; hi <= h.Rows; hi++ {
			m, err := OpenRows(h.Cols, h.Escapes, enc[HeaderSize+lo*rb:HeaderSize+hi*rb])
			if err != nil {
				t.Fatalf("rows [%d, %d): %v", lo, hi, err)
			}
			if m.Rows() != hi-lo {
				t.Fatalf("rows [%d, %d): %d rows", lo, hi, m.Rows())
			}
			a, b := make([]byte, 2*h.Cols), make([]byte, 2*h.Cols)
			for r := lo; r < hi; r++ {
				m.DecodeRowBF16(a, r-lo)
				whole.DecodeRowBF16(b, r)
				if !bytes.Equal(a, b) {
					t.Fatalf("rows [%d, %d): row %d differs", lo, hi, r)
				}
			}
		}
	}
	if _, err := OpenRows(h.Cols, h.Escapes, enc[HeaderSize:HeaderSize+rb+1]); !errors.Is(err, ErrMalformed) {
		t.Errorf("a part row: %v", err)
	}
	bad := append([]byte(nil), enc...)
	bad[row1+100] = 9
	if _, err := OpenRows(h.Cols, h.Escapes, bad[row1:]); !errors.Is(err, ErrMalformed) {
		t.Errorf("a malformed row: %v", err)
	}
	if _, err := OpenRows(h.Cols, h.Cols+1, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("an escape area wider than the row: %v", err)
	}
}

// TestParseHeaderOf: the header alone, with the matrix's length, reads as the whole matrix's
// does, and is refused when that length is not the one the header gives.
func TestParseHeaderOf(t *testing.T) {
	enc := sample(t)
	want, err := ParseHeader(enc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseHeaderOf(enc[:HeaderSize], int64(len(enc)))
	if err != nil || got != want {
		t.Fatalf("ParseHeaderOf = %+v, %v; want %+v", got, err, want)
	}
	for _, c := range []struct {
		head []byte
		size int64
		want string
	}{
		{enc[:HeaderSize], int64(len(enc)) + 1, "needs"},
		{enc[:HeaderSize-1], int64(len(enc)), "shorter than"},
		{enc[:HeaderSize], HeaderSize - 1, "shorter than"},
		{append([]byte("LL13"), enc[4:HeaderSize]...), int64(len(enc)), "magic"},
	} {
		_, err := ParseHeaderOf(c.head, c.size)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseHeaderOf(%d bytes, %d): %v, want ErrMalformed naming %q", len(c.head), c.size, err, c.want)
		}
	}
}

// FuzzOpen feeds arbitrary bytes to Open. Whatever it accepts must be the
// one encoding of the weights it decodes to, and the kernels must run on it;
// whatever it refuses must be refused with a *MalformedError. The rows after
// a well-formed header also go to OpenRows, which must accept them when Open
// did and may accept more (a row range needs no more than its own escapes). The seeds in
// testdata/fuzz/FuzzOpen are encodings of small matrices (every special
// code, escapes, short blocks) and corruptions of them.
func FuzzOpen(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := ParseHeader(data); err == nil && h.Cols > 0 && h.Rows > 0 {
			rm, rerr := OpenRows(h.Cols, h.Escapes, data[HeaderSize:])
			if _, err := Open(data); err == nil && rerr != nil {
				t.Fatalf("Open accepts, OpenRows refuses: %v", rerr)
			}
			if rerr == nil && rm.Rows() != h.Rows {
				t.Fatalf("OpenRows: %d rows, header %d", rm.Rows(), h.Rows)
			}
			if rerr != nil && !errors.Is(rerr, ErrMalformed) {
				t.Fatalf("OpenRows refused with %v", rerr)
			}
		}
		m, err := Open(data)
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Open refused with %T %v, want a *MalformedError", err, err)
			}
			return
		}
		if m.Cols() == 0 || m.Rows() == 0 {
			// An empty matrix: 16 bytes may claim 2^31 empty rows or
			// columns, which a caller sizes its vectors by (from its own
			// shape, checked against the header); there is nothing to decode.
			if len(data) != HeaderSize || m.Header().Escapes != 0 {
				t.Fatalf("accepted [%d, %d] in %d bytes with %d escape bytes", m.Rows(), m.Cols(), len(data), m.Header().Escapes)
			}
			return
		}
		w := decodeAll(m)
		again, err := Encode(m.Rows(), m.Cols(), w)
		if err != nil {
			t.Fatalf("re-encoding an accepted matrix: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatal("accepted bytes are not the encoding of the weights they decode to")
		}
		x := make([]float32, m.Cols())
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		dst := make([]float32, 2*m.Rows())
		m.MatVec(dst[:m.Rows()], x)
		m.MatMul(dst, m.Rows(), append(x[:m.Cols():m.Cols()], x...), 2)
	})
}

// TestFuzzSeeds checks that the committed seeds cover both outcomes, so the
// fuzz target starts from accepted matrices as well as refusals.
func TestFuzzSeeds(t *testing.T) {
	seeds, err := readSeeds("testdata/fuzz/FuzzOpen")
	if err != nil {
		t.Fatal(err)
	}
	ok, bad := 0, 0
	for _, s := range seeds {
		if _, err := Open(s); err == nil {
			ok++
		} else {
			bad++
		}
	}
	if ok < 3 || bad < 3 {
		t.Fatalf("%d seeds open and %d are refused, want at least 3 of each", ok, bad)
	}
}

// readSeeds parses the corpus files of a fuzz target ("go test fuzz v1"
// followed by one []byte literal).
func readSeeds(dir string) ([][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)
		if len(lines) != 2 || lines[0] != "go test fuzz v1" {
			return nil, fmt.Errorf("%s: not a fuzz corpus file", e.Name())
		}
		lit := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		s, err := strconv.Unquote(lit)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", e.Name(), err)
		}
		out = append(out, []byte(s))
	}
	return out, nil
}

// TestWriteSeeds regenerates testdata/fuzz/FuzzOpen when K3_WRITE_SEEDS is
// set; otherwise it is skipped.
func TestWriteSeeds(t *testing.T) {
	if os.Getenv("K3_WRITE_SEEDS") == "" {
		t.Skip("set K3_WRITE_SEEDS=1 to rewrite the fuzz seeds")
	}
	var seeds [][]byte
	add := func(b []byte) { seeds = append(seeds, append([]byte(nil), b...)) }
	s := sample(t)
	add(s)
	specials := []uint16{0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC1, 0xFFFF, 0x3F80, 0xBF80, 0x0080, 0x2B80}
	enc, err := Encode(3, 4, bf16Bytes(specials))
	if err != nil {
		t.Fatal(err)
	}
	add(enc)
	codes := make([]uint16, 2*70)
	for i := range codes {
		codes[i] = uint16(0x3C00 + 37*i)
	}
	codes[5], codes[80] = 0, 0x0003
	enc, _ = Encode(2, 70, bf16Bytes(codes))
	add(enc)
	enc, _ = Encode(0, 0, nil)
	add(enc)
	bad := append([]byte(nil), s...)
	bad[row0] = 250
	add(bad)
	bad = append([]byte(nil), s...)
	bad[row0+100] = 120
	add(bad)
	bad = append([]byte(nil), s...)
	binary.LittleEndian.PutUint32(bad[12:], 1000)
	add(bad)
	add(s[:20])
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, b := range seeds {
		text := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPlainBlocks holds the fast check of whole blocks (the SWAR twin and, with AVX2, the
// assembly) to the column-by-column one: a run of blocks is accepted exactly up to the first
// block that has an escape index or that checkBlock refuses, on blocks built to sit on every
// side of the rule (bases 0, 1, MaxBase and above it; no index 14, one at every position; an
// escape at every position).
func TestPlainBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 12))
	const n = 64
	nib := make([]byte, n*BlockSize/2)
	bases := make([]byte, n)
	esc := bytes.Repeat([]byte{0}, BlockSize) // room for every escape; their exponents are 0
	ends := map[int]int{}
	for trial := range 4000 {
		for k := range n {
			bases[k] = []byte{0, 1, 113, MaxBase, MaxBase + 1, 255, byte(r.IntN(256))}[r.IntN(7)]
			kind := r.IntN(5)
			if r.IntN(32) != 0 { // mostly blocks that pass, so that runs reach the end
				bases[k], kind = []byte{0, 1, 113, MaxBase}[r.IntN(4)], 0
			}
			blk := nib[k*BlockSize/2 : (k+1)*BlockSize/2]
			for i := range blk {
				blk[i] = byte(r.IntN(14)) | byte(r.IntN(14))<<4 // indices 0–13
			}
			switch kind {
			case 0, 4: // the window's top used once, at any column
				c := r.IntN(BlockSize)
				blk[c/2] = blk[c/2]&^(0xF<<(4*(c&1))) | 14<<(4*(c&1))
			case 1: // an escape at any column, perhaps beside the top
				c := r.IntN(BlockSize)
				blk[c/2] |= 0xF << (4 * (c & 1))
				if r.IntN(2) == 0 {
					c = r.IntN(BlockSize)
					blk[c/2] = blk[c/2]&^(0xF<<(4*(c&1))) | 14<<(4*(c&1))
				}
			case 2: // every index at the top
				for i := range blk {
					blk[i] = 0xEE
				}
			}
		}
		want := n
		for k := range n {
			ne, err := checkBlock(0, k, int(bases[k]), n*BlockSize, nib, esc, 0)
			if err != nil || ne != 0 {
				want = k
				break
			}
		}
		if got := plainBlocksGo(nib, bases); got != want {
			t.Fatalf("trial %d: the Go check accepts %d blocks, the column check %d", trial, got, want)
		}
		if haveAVX2 {
			if got := plainBlocks(nib, bases, n, len(nib)); got != want {
				t.Fatalf("trial %d: the assembly check accepts %d blocks, the column check %d", trial, got, want)
			}
		}
		ends[want]++
	}
	// The trials must stop at many places, the end included, or the rule is not exercised.
	if len(ends) < 10 || ends[n] == 0 {
		t.Fatalf("the trials stopped at %d different blocks, %d ran to the end", len(ends), ends[n])
	}
}
