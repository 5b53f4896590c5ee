package strictjson

import (
	"errors"
	"testing"
	"unicode/utf8"
)

func TestUnquote(t *testing.T) {
	ok := []struct{ in, want string }{
		{`""`, ""},
		{`"abc"`, "abc"},
		{`"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
		{`"\u00E9\u00e9"`, "éé"},
		{`"\uD834\uDD1E"`, "\U0001D11E"},
		{`"\udbff\udfff"`, "\U0010FFFF"},
		{`"\ud800\udc00"`, "\U00010000"},
		{`"\uffff"`, "\uffff"},
		{`"x\u0000y"`, "x\x00y"},
		{`"日本語"`, "日本語"},
		{"\"\u2028\"", "\u2028"},
	}
	for _, c := range ok {
		got, err := Unquote([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("Unquote(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	bad := []struct {
		in  string
		err error
		off int64
	}{
		{``, ErrSyntax, 0},
		{`abc`, ErrSyntax, 0},
		{`"abc`, ErrSyntax, 4},
		{`"abc"x`, ErrSyntax, 5},
		{` "abc"`, ErrSyntax, 0},
		{`"\`, ErrSyntax, 2},
		{`"\q"`, ErrSyntax, 1},
		{`"\u00"`, ErrSyntax, 1},
		{`"\ud800"`, ErrLoneSurrogate, 1},
		{`"\ud800\ud800"`, ErrLoneSurrogate, 1},
		{`"\ud800\u00zz"`, ErrSyntax, 7},
		{`"\udc00\ud800"`, ErrLoneSurrogate, 1},
		{"\"\x7f\x80\"", ErrInvalidUTF8, 2},
		{"\"\xf4\x90\x80\x80\"", ErrInvalidUTF8, 1}, // above U+10FFFF
		{"\"\n\"", ErrSyntax, 1},
		{"\"\\n\x1f\"", ErrSyntax, 3},
	}
	for _, c := range bad {
		got, err := Unquote([]byte(c.in))
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, c.err) || e.Offset != c.off {
			t.Errorf("Unquote(%q) = %q, %v; want %v at %d", c.in, got, err, c.err, c.off)
		}
	}
}

func TestAppendQuoteRoundTrip(t *testing.T) {
	in := []string{"", "plain", "q\"b\\s/", "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é日😀\u2028", `weird\name."with"quotes`}
	for _, s := range in {
		q := AppendQuote([]byte("prefix:"), s)
		if string(q[:7]) != "prefix:" {
			t.Fatalf("AppendQuote lost the prefix")
		}
		got, err := Unquote(q[7:])
		if err != nil || got != s {
			t.Errorf("Unquote(AppendQuote(%q)) = %q, %v", s, got, err)
		}
	}
	if got := string(AppendQuote(nil, "a\xffb")); got != `"a\ufffdb"` {
		t.Errorf("invalid UTF-8 quoted as %s", got)
	}
	if got := string(AppendQuote(nil, "\x01")); got != `"\u0001"` {
		t.Errorf("control quoted as %s", got)
	}
	// Every single byte and every rune class round-trips or is replaced.
	for b := 0; b < 256; b++ {
		s := string([]byte{byte(b)})
		got, err := Unquote(AppendQuote(nil, s))
		want := s
		if !utf8.ValidString(s) {
			want = "\ufffd"
		}
		if err != nil || got != want {
			t.Errorf("byte %#x: %q, %v", b, got, err)
		}
	}
}
