package serve

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/k3-project/k3/tokenizer"
)

// TestUTF8Stream: however the bytes of a text are split into tokens, the streamed pieces
// concatenate to the whole text's replacement (what a non-streamed completion returns), and a
// valid text is never streamed with a U+FFFD: a character split across tokens is held back
// until it is whole.
func TestUTF8Stream(t *testing.T) {
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
		var u utf8Stream
		var got strings.Builder
		for rest := whole; len(rest) > 0; {
			k := 1 + r.IntN(min(len(rest), 4))
			u.push(rest[:k])
			rest = rest[k:]
			piece := u.take()
			if utf8.Valid(whole) && strings.ContainsRune(piece, utf8.RuneError) {
				t.Fatalf("%q: streamed piece %q holds a replacement character", whole, piece)
			}
			got.WriteString(piece)
		}
		got.WriteString(u.flush())
		if want := tokenizer.ReplaceInvalidUTF8(whole); got.String() != want {
			t.Fatalf("%x: streamed %q, whole %q", whole, got.String(), want)
		}
	}
}
