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
// 1.0 and leaves its one escape byte unused. Rows are 95 bytes: bases at
// 0–1, sign-and-mantissa at 2–66, index planes at 67–93 (block 0's three
// at 67, 75 and 83, block 1's one-byte planes at 91, 92 and 93), the
// escape at 94. 1.0 is index 6 (planes 1 and 2) of the window [121, 127].
func sample(t *testing.T) []byte {
	t.Helper()
	codes := make([]uint16, 2*65)
	for i := range codes {
		codes[i] = 0x3F80
	}
	codes[3] = 0x2B80 // 2^−40: exponent 87, below the window [121, 127]
	enc, err := Encode(2, 65, bf16Bytes(codes))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := ParseHeader(enc); h.Escapes != 1 || h.RowBytes() != 95 {
		t.Fatalf("sample header %+v, row %d bytes: the mutations below assume 1 escape and 95", h, h.RowBytes())
	}
	return enc
}

const row0, row1 = HeaderSize, HeaderSize + 95

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
		{"first layout", func(b []byte) []byte { copy(b, "LL12"); return b }, -1, -1, "pack the trunk again"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, -1, -1, "needs"},
		{"truncated row", func(b []byte) []byte { return b[:len(b)-1] }, -1, -1, "needs"},
		{"escape area wider than any row needs", widen, -1, -1, "use at most 1"},
		{"escape area wider than the row", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 66); return b }, -1, -1, "escape bytes per row"},
		{"huge shape", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1<<31); return b }, -1, -1, "outside"},
		{"base above 249", func(b []byte) []byte { b[row0] = 250; return b }, 0, 0, "above 249"},
		// The same weight (2^0) as base 122 + index 5 instead of 121 + 6.
		{"base not canonical", func(b []byte) []byte { b[row1+1] = 122; b[row1+91] |= 1; b[row1+92] &^= 1; return b }, 1, 1, "largest exponent 127 gives 121"},
		// Column 2 escapes too, taking the byte column 3 needs.
		{"escape beyond the area", func(b []byte) []byte { b[row0+67] |= 1 << 2; return b }, 0, 0, "column 3 escapes beyond the row's 1 escape bytes"},
		{"escape inside the window", func(b []byte) []byte { b[row0+94] = 121; return b }, 0, 0, "not below the window base"},
		{"escape above the window", func(b []byte) []byte { b[row0+94] = 200; return b }, 0, 0, "not below the window base"},
		{"every index below the top", func(b []byte) []byte { clear(b[row1+83 : row1+91]); return b }, 1, 0, "largest exponent 123 gives 117"},
		{"padding bit", func(b []byte) []byte { b[row1+92] |= 0x02; return b }, 1, 1, "column 65, after the row's last"},
		{"unused escape byte", func(b []byte) []byte { b[row1+94] = 5; return b }, 1, -1, "unused but not zero"},
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
	bad[row1+94] = 9
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
		{append([]byte("LL12"), enc[4:HeaderSize]...), int64(len(enc)), "first layout"},
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
	bad[row0+94] = 121
	add(bad)
	bad = append([]byte(nil), s...)
	bad[row1+92] |= 0x80
	add(bad)
	bad = append([]byte(nil), s...)
	binary.LittleEndian.PutUint32(bad[12:], 1000)
	add(bad)
	add(s[:20])
	names := make([]string, len(seeds))
	for i := range seeds {
		names[i] = fmt.Sprintf("seed-%02d", i)
	}
	// Shapes the fuzzer once found mishandled: a header of 2^24+50 empty rows and one of
	// 805,314,048 columns and no rows (nothing to decode, however large the shape), and an
	// escape area wider than any row needs (Open refuses it, OpenRows may not).
	named := func(name string, b []byte) {
		add(b)
		names = append(names, fmt.Sprintf("seed-%02d-%s", len(names), name))
	}
	named("empty-rows", Header{Rows: 1<<24 + 50}.bytes())
	named("empty-cols", Header{Cols: 0x30001e00}.bytes())
	named("wide-escapes", widen(s))
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, b := range seeds {
		text := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, names[i]), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// bytes returns the encoded header alone.
func (h Header) bytes() []byte {
	b := make([]byte, HeaderSize)
	h.put(b)
	return b
}

// checkBlockRef is §6.11.4's rule for one block, column by column, as a
// reader without the bit-plane arithmetic of checkBlock would apply it; it
// returns the escapes used after the block, or false for a block it refuses.
func checkBlockRef(b, n int, pl []byte, w int, esc []byte, ne int) (int, bool) {
	if b > MaxBase {
		return 0, false
	}
	for j := n; j < 8*w; j++ { // padding bits
		for p := range IndexBits {
			if pl[p*w+j/8]>>(j%8)&1 != 0 {
				return 0, false
			}
		}
	}
	emax := 0
	for j := range n {
		ix := 0
		for p := range IndexBits {
			ix |= int(pl[p*w+j/8]>>(j%8)&1) << p
		}
		e := b + ix
		if ix == EscapeIndex {
			if ne == len(esc) || int(esc[ne]) >= b {
				return 0, false
			}
			e = int(esc[ne])
			ne++
		}
		emax = max(emax, e)
	}
	return ne, b == canonicalBase(emax)
}

// TestCheckBlockRule holds checkBlock, which works on whole planes, to the
// column-by-column rule, on blocks built to sit on every side of it: bases
// 0, 1, mid-range, MaxBase and above it; the window's top used or not;
// escapes anywhere, with exponents below, at and above the base, and more
// of them than the area holds; short blocks with and without padding bits.
func TestCheckBlockRule(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 12))
	outcomes, rows := map[bool]int{}, map[bool]int{}
	for trial := range 20000 {
		n := BlockSize
		if r.IntN(4) == 0 {
			n = 1 + r.IntN(BlockSize)
		}
		w := (n + 7) / 8
		pl := make([]byte, IndexBits*w)
		b := []int{0, 1, 113, MaxBase, MaxBase + 1, 255, r.IntN(256)}[r.IntN(7)]
		for j := range n {
			ix := r.IntN(6) // below the top
			switch r.IntN(16) {
			case 0:
				ix = EscapeIndex
			case 1, 2:
				ix = Window - 1
			}
			for p := range IndexBits {
				pl[p*w+j/8] |= byte(ix>>p&1) << (j % 8)
			}
		}
		if n%8 != 0 && r.IntN(8) == 0 {
			pl[r.IntN(IndexBits)*w+w-1] |= 0x80
		}
		esc := make([]byte, r.IntN(8))
		for i := range esc {
			esc[i] = byte(max(0, b-1-r.IntN(3)))
			if r.IntN(16) == 0 {
				esc[i] = byte(b + r.IntN(3))
			}
		}
		ne0 := r.IntN(len(esc) + 1)
		wantNe, ok := checkBlockRef(b, n, pl, w, esc, ne0)
		gotNe, err := checkBlock(0, 0, b, n, pl, w, esc, ne0)
		if ok != (err == nil) || ok && gotNe != wantNe {
			t.Fatalf("trial %d: base %d, %d columns, planes %x, escapes %v from %d: checkBlock %d, %v; the rule %d, %v",
				trial, b, n, pl, esc, ne0, gotNe, err, wantNe, ok)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("trial %d: %v is not ErrMalformed", trial, err)
		}
		if n == BlockSize && ne0 == 0 {
			// The same block as a one-row piece, which checkRow takes through its inline
			// path: accepted exactly when the rule accepts it and leaves no escape byte
			// unused but set.
			row := append(append(append([]byte{byte(b)}, make([]byte, BlockSize)...), pl...), esc...)
			rowOK := ok
			for _, v := range esc[min(wantNe, len(esc)):] {
				rowOK = rowOK && v == 0
			}
			if _, err := OpenRows(BlockSize, len(esc), row); rowOK != (err == nil) {
				t.Fatalf("trial %d: base %d, planes %x, escapes %v: OpenRows %v, the rule %v", trial, b, pl, esc, err, rowOK)
			}
			// The same through the Go check alone (OpenRows uses the assembly where it can).
			h := Header{Rows: 1, Cols: BlockSize, Escapes: len(esc)}
			g := &Matrix{h: h, rb: int(h.RowBytes()), rows: row}
			if err := g.checkRows(); rowOK != (err == nil) {
				t.Fatalf("trial %d: base %d, planes %x, escapes %v: the Go check %v, the rule %v", trial, b, pl, esc, err, rowOK)
			}
			rows[rowOK]++
		}
		outcomes[ok]++
	}
	if outcomes[true] < 1000 || outcomes[false] < 1000 || rows[true] < 100 || rows[false] < 100 {
		t.Fatalf("accepted %d and refused %d blocks, %d and %d as rows: the trials do not exercise both sides",
			outcomes[true], outcomes[false], rows[true], rows[false])
	}
}
