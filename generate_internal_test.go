package k3

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/k3-project/k3/tokenizer"
)

// pieces is a TokenBytes that returns its slices in turn, whatever the id.
type pieces [][]byte

func (p *pieces) TokenBytes(int) ([]byte, error) {
	b := (*p)[0]
	*p = (*p)[1:]
	return b, nil
}

// TestTextReleasedWhole: however the bytes of a text are split into tokens, the pieces OnText
// receives concatenate to the text, a valid text never reaches OnText cut inside a character,
// and replacing the invalid bytes of each piece (what the server streams) gives the whole text's
// replacement (what a completion returns), with and without a stop string held back.
func TestTextReleasedWhole(t *testing.T) {
	// Bytes that start, continue, or cannot be part of multi-byte sequences.
	alphabet := []byte{'a', ' ', 0xC2, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xED, 0xA0, 0xC0, 0xFF, 0xF4, 0x90}
	valid := []string{"€", "é", "😀", "a€b", "日本語", "x😀😀y"}
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 20000 {
		var whole []byte
		if n%4 == 0 {
			whole = []byte(valid[r.IntN(len(valid))] + valid[r.IntN(len(valid))])
		} else {
			for range 1 + r.IntN(10) {
				whole = append(whole, alphabet[r.IntN(len(alphabet))])
			}
		}
		var toks pieces
		for rest := whole; len(rest) > 0; {
			k := 1 + r.IntN(min(len(rest), 4))
			toks = append(toks, rest[:k])
			rest = rest[k:]
		}
		var stops []string
		if n%2 == 1 {
			stops = []string{"\xe2\x82\xad"} // shares its first two bytes with €: held back longer
		}
		var raw []byte
		var text strings.Builder
		st, err := newStopText(&toks, stops, func(b []byte) {
			if utf8.Valid(whole) && !utf8.Valid(b) {
				t.Fatalf("%q: released %q, not whole characters", whole, b)
			}
			raw = append(raw, b...)
			text.WriteString(tokenizer.ReplaceInvalidUTF8(b))
		})
		if err != nil {
			t.Fatal(err)
		}
		for len(toks) > 0 {
			if _, err := st.push(0); err != nil {
				t.Fatal(err)
			}
		}
		st.flush()
		if string(raw) != string(whole) {
			t.Fatalf("%x: released %x", whole, raw)
		}
		if want := tokenizer.ReplaceInvalidUTF8(whole); text.String() != want {
			t.Fatalf("%x: pieces replaced give %q, the whole %q", whole, text.String(), want)
		}
	}
}
