package lossless12

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

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
