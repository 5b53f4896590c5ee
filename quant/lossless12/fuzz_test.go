package lossless12

import (
	"bytes"
	"errors"
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
