package tokenizer

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// byteFile returns the 256 single-byte tokens as rank-file lines 0..255.
func byteFile() string {
	var sb strings.Builder
	for b := 0; b < 256; b++ {
		fmt.Fprintf(&sb, "%s %d\n", base64.StdEncoding.EncodeToString([]byte{byte(b)}), b)
	}
	return sb.String()
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestParseRanksAccepts(t *testing.T) {
	// CRLF, empty lines, out-of-order ranks and a missing final newline.
	body := byteFile()
	text := strings.ReplaceAll(body, "\n", "\r\n") + "\r\n\n" + b64("ab") + " 257\n" + b64("abc") + " 258\n\n" + b64("bc") + " 256"
	r, err := ParseRanks([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 259 {
		t.Fatalf("Len %d", r.Len())
	}
	for tok, want := range map[string]int{"ab": 257, "abc": 258, "bc": 256, "a": 'a', "\x00": 0} {
		if got, ok := r.Rank([]byte(tok)); !ok || got != want {
			t.Errorf("Rank(%q) = %d,%v want %d", tok, got, ok, want)
		}
		if b, ok := r.Token(want); !ok || string(b) != tok {
			t.Errorf("Token(%d) = %q", want, b)
		}
	}
	if _, ok := r.Rank([]byte("abcd")); ok {
		t.Error("non-token found")
	}
	if r.Digest() != sha256.Sum256([]byte(text)) {
		t.Error("digest")
	}
	if r.IsKimiReference() {
		t.Error("toy file claims to be the Kimi reference")
	}
}

func TestParseRanksRefusals(t *testing.T) {
	base := byteFile() // lines 1..256
	cases := []struct {
		name string
		text string
		line int
		msg  string
	}{
		{"no space", base + b64("ab") + "256\n", 257, "no space"},
		{"two spaces", base + b64("ab") + "  256\n", 257, "canonical decimal"},
		{"tab", base + b64("ab") + "\t256\n", 257, "no space"},
		{"leading zero", base + b64("ab") + " 0256\n", 257, "canonical decimal"},
		{"sign", base + b64("ab") + " +256\n", 257, "canonical decimal"},
		{"empty rank", base + b64("ab") + " \n", 257, "canonical decimal"},
		{"trailing space", base + b64("ab") + " 256 \n", 257, "canonical decimal"},
		{"bad char", base + "Y*== 256\n", 257, "invalid base64"},
		{"no padding", base + "YWI 256\n", 257, "multiple of 4"},
		{"non-canonical", base + "YWJ= 256\n", 257, "non-canonical"},
		{"padding inside", base + "YQ==YWI= 256\n", 257, "invalid base64"},
		{"empty token", base + " 256\n", 257, "empty token"},
		{"lone CR inside", base + "Y\rI= 256\n", 257, "invalid base64"},
		{"duplicate rank", base + b64("ab") + " 5\n", 257, "rank 5 already given on line 6"},
		{"duplicate token", base + b64("ab") + " 256\n" + b64("ab") + " 257\n", 258, "already has rank 256 (line 257)"},
		{"gap", base + b64("ab") + " 257\n", 257, "leaves a gap"},
		{"too large", base + b64("ab") + " 9999\n", 257, "larger than"},
		{"missing byte", strings.Replace(base, b64("\xff")+" 255\n", b64("ab")+" 255\n", 1), 0, "single-byte token 0xff is missing"},
		{"too long", base + base64.StdEncoding.EncodeToString(make([]byte, 65536)) + " 256\n", 257, "token length 65536"},
		{"empty file", "", 0, "single-byte token 0x00"},
	}
	for _, c := range cases {
		_, err := ParseRanks([]byte(c.text))
		var re *RankFileError
		if !errors.As(err, &re) || !errors.Is(err, ErrRankFile) {
			t.Errorf("%s: err %v, want a RankFileError", c.name, err)
			continue
		}
		if re.Line != c.line || !strings.Contains(re.Msg, c.msg) {
			t.Errorf("%s: got line %d %q, want line %d containing %q", c.name, re.Line, re.Msg, c.line, c.msg)
		}
	}
}

func TestBase64MatchesStdlib(t *testing.T) {
	for n := 0; n < 40; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*37 + n)
		}
		enc := base64.StdEncoding.EncodeToString(b)
		got, msg := appendBase64(nil, []byte(enc))
		if n == 0 {
			if msg == "" {
				t.Error("empty accepted")
			}
			continue
		}
		if msg != "" || string(got) != string(b) {
			t.Errorf("n=%d: %q %q", n, got, msg)
		}
	}
}

func TestNewRanks(t *testing.T) {
	toks := make([][]byte, 256)
	for i := range toks {
		toks[i] = []byte{byte(i)}
	}
	toks = append(toks, []byte("ab"))
	r, err := NewRanks(toks)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Rank([]byte("ab")); !ok || got != 256 {
		t.Error("ab")
	}
	if _, err := NewRanks(toks[1:]); err == nil {
		t.Error("missing byte accepted")
	}
}

func TestReadRanksAndAccessors(t *testing.T) {
	r, err := ReadRanks(strings.NewReader(byteFile() + b64("hello") + " 256\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxLen() != 5 || r.Len() != 257 {
		t.Errorf("MaxLen %d Len %d", r.MaxLen(), r.Len())
	}
	if _, ok := r.Token(257); ok {
		t.Error("Token out of range")
	}
	if _, err := LoadRanks(filepath.Join(t.TempDir(), "missing.model")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist", err)
	}
	e, err := New(Spec{Name: "n", Ranks: r, Split: SplitO200K})
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "n" || e.Split().String() != "o200k" || SplitCL100K.String() != "cl100k" || SplitKimi.String() != "kimi" || SplitRule(9).String() != "SplitRule(9)" {
		t.Error("names")
	}
	// "hello" is a token; " hello" is not and falls back to single bytes.
	n, err := e.CountTokens("hello hello", NoSpecial)
	ids, _ := e.EncodeOrdinary("hello hello")
	if err != nil || n != 7 || len(ids) != 7 || ids[0] != 256 || ids[1] != ' ' {
		t.Errorf("CountTokens %d %v, ids %v", n, err, ids)
	}
	if _, err := New(Spec{Ranks: r, Split: 0}); err == nil {
		t.Error("invalid rule accepted")
	}
	if _, err := New(Spec{Split: SplitKimi}); err == nil {
		t.Error("nil ranks accepted")
	}
	if _, err := e.Encode("x", Mode(9)); err == nil {
		t.Error("invalid mode accepted")
	}
	if _, err := SplitRule(0).Split("x"); err == nil {
		t.Error("invalid rule split")
	}
	for _, err := range []error{&InvalidUTF8Error{3}, &UnknownIDError{5, 1}, &DisallowedSpecialError{"[X]", 2}, &RankFileError{0, "m"}, &SpecialsError{"m"}} {
		if err.Error() == "" {
			t.Error("empty message")
		}
	}
}
