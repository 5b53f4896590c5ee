package tokenizer

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// pyReplace is an independent statement of Python's errors="replace" for
// UTF-8: decode greedily; on an error, the replaced span is the longest
// prefix of the remaining bytes that is a prefix of some well-formed
// sequence (at least one byte). It works by brute force over candidate
// lengths, not by the lead-byte table the package uses.
func pyReplace(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); {
		r, sz := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || sz > 1 {
			sb.WriteString(string(b[i : i+sz]))
			i += sz
			continue
		}
		// Longest k in 1..3 such that b[i:i+k] is a proper prefix of some valid
		// encoding: try every completion with continuation bytes.
		best := 1
		for k := 2; k <= 3 && i+k <= len(b); k++ {
			if isValidPrefix(b[i : i+k]) {
				best = k
			}
		}
		if best == 1 || !isValidPrefix(b[i:i+best]) {
			best = 1
		}
		sb.WriteString("\uFFFD")
		i += best
	}
	return sb.String()
}

// isValidPrefix reports whether p can be extended to a valid UTF-8 sequence.
func isValidPrefix(p []byte) bool {
	for ext := 0; ext <= 3; ext++ {
		if len(p)+ext > 4 {
			break
		}
		// Try all continuation bytes for the missing positions (small).
		var try func(q []byte) bool
		try = func(q []byte) bool {
			if len(q) == len(p)+ext {
				r, sz := utf8.DecodeRune(q)
				return !(r == utf8.RuneError && sz <= 1) && sz == len(q)
			}
			for c := 0x80; c <= 0xBF; c++ {
				if try(append(q, byte(c))) {
					return true
				}
			}
			return false
		}
		if try(append([]byte(nil), p...)) {
			return true
		}
	}
	return false
}

func TestReplaceInvalidUTF8(t *testing.T) {
	cases := map[string]string{
		"abc":                   "abc",
		"\xff":                  "\uFFFD",
		"\xe2\x82":              "\uFFFD",
		"\xe2\x82A":             "\uFFFDA",
		"\xe0\x80":              "\uFFFD\uFFFD",
		"\xed\xa0\x80":          "\uFFFD\uFFFD\uFFFD",
		"\xf0\x9f\x98":          "\uFFFD",
		"\xf0\x9f\x98\x80":      "😀",
		"\xf4\x90\x80\x80":      "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xc0\xaf":              "\uFFFD\uFFFD",
		"a\xf1\x80\x80\xe1\x80": "a\uFFFD\uFFFD",
		"\uFFFD":                "\uFFFD",
	}
	for in, want := range cases {
		if got := ReplaceInvalidUTF8([]byte(in)); got != want {
			t.Errorf("%q -> %q want %q", in, got, want)
		}
	}
	rng := rand.New(rand.NewSource(1))
	alpha := []byte{'a', 0x80, 0x9f, 0xa0, 0xbf, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff}
	for n := 0; n < 3000; n++ {
		b := make([]byte, rng.Intn(8))
		for i := range b {
			b[i] = alpha[rng.Intn(len(alpha))]
		}
		if got, want := ReplaceInvalidUTF8(b), pyReplace(b); got != want {
			t.Fatalf("%q -> %q, independent %q", b, got, want)
		}
	}
}

func toyEncoding(t testing.TB) *Encoding {
	t.Helper()
	toks := make([][]byte, 256)
	for i := range toks {
		toks[i] = []byte{byte(i)}
	}
	toks = append(toks, []byte("\xe4\xb8"), []byte("\xad\xe6"), []byte("\x96\x87"), []byte("ab"), []byte("\xf0\x9f"))
	r, err := NewRanks(toks)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Spec{Name: "toy", Ranks: r, Split: SplitKimi, Specials: map[string]int{"[EOS]": 300}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDecode(t *testing.T) {
	e := toyEncoding(t)
	s, err := e.Decode([]int{256, 257, 258, 300, 'a'})
	if err != nil || s != "中文[EOS]a" {
		t.Errorf("Decode = %q, %v", s, err)
	}
	s, err = e.Decode([]int{256, 'x', 0xff})
	if err != nil || s != "\uFFFDx\uFFFD" {
		t.Errorf("Decode invalid = %q, %v", s, err)
	}
	for _, bad := range []int{-1, 261, 299, 301} {
		_, err := e.DecodeBytes([]int{'a', bad})
		var ue *UnknownIDError
		if !errors.As(err, &ue) || ue.ID != bad || ue.Index != 1 || !errors.Is(err, ErrUnknownID) {
			t.Errorf("id %d: %v", bad, err)
		}
	}
	if e.VocabSize() != 301 {
		t.Errorf("VocabSize %d", e.VocabSize())
	}
	if b, err := e.TokenBytes(300); err != nil || string(b) != "[EOS]" {
		t.Error("TokenBytes special")
	}
	if id, ok := e.TokenID([]byte("ab")); !ok || id != 259 {
		t.Error("TokenID")
	}
	if id, ok := e.TokenID([]byte("[EOS]")); !ok || id != 300 {
		t.Error("TokenID special")
	}
}

func TestStreamDecoder(t *testing.T) {
	e := toyEncoding(t)
	// 中 = e4 b8 ad, 文 = e6 96 87: the tokens cut both characters.
	d := e.NewStreamDecoder()
	var out []string
	for _, id := range []int{256, 257, 258, 'x'} {
		s, err := d.Push(id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if strings.Join(out, "|") != "|中|文|x" {
		t.Errorf("pieces %q", out)
	}
	// A held prefix that is then broken.
	d = e.NewStreamDecoder()
	s1, _ := d.Push(260) // f0 9f: held
	if s1 != "" || d.Pending() != 2 {
		t.Errorf("held %q %d", s1, d.Pending())
	}
	s2, _ := d.Push('A')
	if s2 != "\uFFFDA" {
		t.Errorf("broken %q", s2)
	}
	s3, _ := d.Push(260)
	if s3 != "" || d.Flush() != "\uFFFD" || d.Pending() != 0 {
		t.Error("flush")
	}
	if _, err := d.Push(299); !errors.Is(err, ErrUnknownID) {
		t.Error("unknown id accepted")
	}
	// Random ids: the concatenation always equals Decode, and nothing is
	// held back beyond 3 bytes.
	rng := rand.New(rand.NewSource(2))
	ids := []int{256, 257, 258, 259, 260, 300, 'a', 0x80, 0xbf, 0xc3, 0xe0, 0xed, 0xf0, 0xf4, 0xff, 0x9f, 0x98, 0x80}
	for n := 0; n < 2000; n++ {
		seq := make([]int, rng.Intn(10))
		for i := range seq {
			seq[i] = ids[rng.Intn(len(ids))]
		}
		got := streamDecode(t, e, seq, func(_ string, d *StreamDecoder) {
			if d.Pending() > 3 {
				t.Fatalf("holding %d bytes", d.Pending())
			}
		})
		if want, _ := e.Decode(seq); got != want {
			t.Fatalf("%v: stream %q, Decode %q", seq, got, want)
		}
	}
}

// TestStreamFixtures streams every kimi-o200k expected id list and checks
// each step emits only valid UTF-8 and the total is the case text.
func TestStreamFixtures(t *testing.T) {
	fe := fixtureByName(t, "kimi-o200k")
	for _, c := range loadFixtures(t).cases {
		got := streamDecode(t, fe.enc, fe.expectedRows[c.ID].Ordinary, func(s string, _ *StreamDecoder) {
			if strings.ContainsRune(s, utf8.RuneError) && !strings.ContainsRune(c.Text, utf8.RuneError) {
				t.Fatalf("case %s: replacement emitted mid-stream", c.ID)
			}
		})
		if got != c.Text {
			t.Errorf("case %s: stream decode differs", c.ID)
		}
	}
}

// TestConcurrentUse encodes and decodes from several goroutines on one
// Encoding (run with -race to check the no-shared-state claim).
func TestConcurrentUse(t *testing.T) {
	e := fuzzEncoding(t, SplitKimi, true)
	text := strings.Repeat("the thing 中文 [BOS] aaaa  \n", 50)
	want, err := e.Encode(text, AllowSpecial)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 20; i++ {
				got, err := e.Encode(text, AllowSpecial)
				if err == nil {
					if _, ok := equalInts(got, want); !ok {
						err = errors.New("ids differ between goroutines")
					}
				}
				if err == nil {
					var s string
					s, err = e.Decode(got)
					if err == nil && s != text {
						err = errors.New("decode differs")
					}
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// streamDecode pushes ids through a StreamDecoder of e one at a time and
// returns all it emitted, the flush included; each is called, when not nil,
// with every piece Push emits and the decoder after it.
func streamDecode(t *testing.T, e *Encoding, ids []int, each func(piece string, d *StreamDecoder)) string {
	t.Helper()
	d := e.NewStreamDecoder()
	var sb strings.Builder
	for _, id := range ids {
		s, err := d.Push(id)
		if err != nil {
			t.Fatal(err)
		}
		if each != nil {
			each(s, d)
		}
		sb.WriteString(s)
	}
	sb.WriteString(d.Flush())
	return sb.String()
}
