package strictjson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseValid(t *testing.T) {
	cases := []struct{ in, want string }{
		{`0`, `0`},
		{` -0 `, `-0`},
		{"\t\r\n 1.5e+10 \n", `1.5e+10`},
		{`-12.0E-3`, `-12.0E-3`},
		{`true`, `true`},
		{`false`, `false`},
		{`null`, `null`},
		{`""`, `""`},
		{`"a\"b\\c\/d\b\f\n\r\t"`, `"a\"b\\c/d\b\f\n\r\t"`},
		{`"\u0041\u00e9\u20ac\ud83d\ude00"`, `"Aé€😀"`},
		{`"\u0000"`, `"\u0000"`},
		{`"héllo wörld ✓ 😀"`, `"héllo wörld ✓ 😀"`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`[1, [2, [3, {}]], "x"]`, `[1,[2,[3,{}]],"x"]`},
		// Key order is the file's, not sorted.
		{`{"z": 1, "a": {"y": [true, null], "b": 2}, "m": "s"}`, `{"z":1,"a":{"y":[true,null],"b":2},"m":"s"}`},
		// Equal values under different keys and equal keys in different objects are fine.
		{`{"a": {"k": 1}, "b": {"k": 1}}`, `{"a":{"k":1},"b":{"k":1}}`},
		// Keys that differ only after escape decoding are different keys.
		{`{"a": 1, "A": 2, "\u00e9": 3, "e\u0301": 4}`, "{\"a\":1,\"A\":2,\"\u00e9\":3,\"e\u0301\":4}"},
	}
	for _, c := range cases {
		v, err := Parse([]byte(c.in))
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := render(v); got != c.want {
			t.Errorf("Parse(%q) = %s, want %s", c.in, got, c.want)
		}
		// Independent check: encoding/json agrees on these duplicate-free inputs.
		std, err := stdDecode([]byte(c.in))
		if err != nil {
			t.Errorf("encoding/json refuses %q: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(toAny(v), std) {
			t.Errorf("Parse(%q) = %#v, encoding/json = %#v", c.in, toAny(v), std)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	cases := []struct {
		in   string
		err  error
		off  int64
		path string
	}{
		{``, ErrSyntax, 0, ""},
		{`   `, ErrSyntax, 3, ""},
		{"\xef\xbb\xbf{}", ErrSyntax, 0, ""},
		{`{} {}`, ErrSyntax, 3, ""},
		{`NaN`, ErrSyntax, 0, ""},
		{`[1, NaN]`, ErrSyntax, 4, "[1]"},
		{`Infinity`, ErrSyntax, 0, ""},
		{`-Infinity`, ErrSyntax, 0, ""},
		{`[1,]`, ErrSyntax, 3, ""},
		{`{"a":1,}`, ErrSyntax, 7, ""},
		{`[,1]`, ErrSyntax, 1, "[0]"},
		{`01`, ErrSyntax, 0, ""},
		{`-01`, ErrSyntax, 0, ""},
		{`1.`, ErrSyntax, 0, ""},
		{`.5`, ErrSyntax, 0, ""},
		{`1e`, ErrSyntax, 0, ""},
		{`+1`, ErrSyntax, 0, ""},
		{`0x10`, ErrSyntax, 1, ""},
		{`tru`, ErrSyntax, 0, ""},
		{`True`, ErrSyntax, 0, ""},
		{`nul`, ErrSyntax, 0, ""},
		{`'a'`, ErrSyntax, 0, ""},
		{`{a:1}`, ErrSyntax, 1, ""},
		{`{"a" 1}`, ErrSyntax, 5, ""},
		{`{"a":1 "b":2}`, ErrSyntax, 7, ""},
		{`[1 2]`, ErrSyntax, 3, ""},
		{`[1`, ErrSyntax, 2, ""},
		{`{"a":`, ErrSyntax, 5, "a"},
		{`"abc`, ErrSyntax, 4, ""},
		{"\"a\tb\"", ErrSyntax, 2, ""},
		{"\"a\x00\"", ErrSyntax, 2, ""},
		{`"\x"`, ErrSyntax, 1, ""},
		{`"\u12"`, ErrSyntax, 1, ""},
		{`"\u12G4"`, ErrSyntax, 1, ""},
		{"[\"\xff\"]", ErrInvalidUTF8, 2, "[0]"},
		{"\"\xed\xa0\x80\"", ErrInvalidUTF8, 1, ""}, // surrogate encoded directly in UTF-8
		{"\"\xc0\xaf\"", ErrInvalidUTF8, 1, ""},     // overlong
		{`"\ud83d"`, ErrLoneSurrogate, 1, ""},
		{`"\ud83dx"`, ErrLoneSurrogate, 1, ""},
		{`"\ud83d\u0041"`, ErrLoneSurrogate, 1, ""},
		{`"ab\ude00"`, ErrLoneSurrogate, 3, ""},
		{`{"a":1,"a":1}`, ErrDuplicateKey, 7, "a"},
		{`{"x":{"b":[{"c":1,"d":2,"c":3}]}}`, ErrDuplicateKey, 24, "x.b[0].c"},
		{`{"\u0061":1,"a":2}`, ErrDuplicateKey, 12, "a"},
		{`{"x y":{"k":1,"k":2}}`, ErrDuplicateKey, 14, `["x y"].k`},
		{"[1]\x00", ErrSyntax, 3, ""},
		{`/*c*/1`, ErrSyntax, 0, ""},
	}
	for _, c := range cases {
		v, err := Parse([]byte(c.in))
		if err == nil {
			t.Errorf("Parse(%q) = %s, want error", c.in, render(v))
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q): error %T is not *Error", c.in, err)
			continue
		}
		if !errors.Is(err, c.err) || e.Offset != c.off || e.Path != c.path {
			t.Errorf("Parse(%q) = %v (sentinel %v, offset %d, path %q), want %v at %d path %q",
				c.in, err, e.Err, e.Offset, e.Path, c.err, c.off, c.path)
		}
	}
}

// Many members switch duplicate detection to a map; it must still catch them.
func TestDuplicateKeyLargeObject(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + string(rune('A'+i%26)) + string(rune('a'+i/26)) + `":1`)
	}
	ok := b.String() + "}"
	v, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if v.Len() != 100 || v.Get("kZc") == nil || v.Get("nope") != nil {
		t.Fatalf("large object: len %d", v.Len())
	}
	if m := v.Members(); m[99].Key != "kVd" {
		t.Fatalf("order lost: last key %q", m[99].Key)
	}
	_, err = Parse([]byte(b.String() + `,"kZc":2}`))
	if !errors.Is(err, ErrDuplicateKey) || !strings.Contains(err.Error(), `"kZc"`) {
		t.Fatalf("duplicate in large object: %v", err)
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat("[", 600) + strings.Repeat("]", 600)
	if _, err := Parse([]byte(deep)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("600 levels: %v, want ErrTooDeep", err)
	}
	if _, err := ParseLimits([]byte(`[[[1]]]`), Limits{MaxDepth: 3}); err != nil {
		t.Errorf("depth 3 under limit 3: %v", err)
	}
	if _, err := ParseLimits([]byte(`[[{"a":1}]]`), Limits{MaxDepth: 2}); !errors.Is(err, ErrTooDeep) {
		t.Errorf("depth 3 under limit 2: %v", err)
	}
	if _, err := ParseLimits([]byte(`[1,2,3,4]`), Limits{MaxBytes: 9}); err != nil {
		t.Errorf("9 bytes under limit 9: %v", err)
	}
	if _, err := ParseLimits([]byte(`[1,2,3,45]`), Limits{MaxBytes: 9}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("10 bytes under limit 9: %v", err)
	}
	// The reader is not drained past the limit: a one-byte reader must still
	// be refused after MaxBytes+1 bytes.
	r := iotest.OneByteReader(strings.NewReader(`[` + strings.Repeat(`1,`, 1000) + `1]`))
	if _, err := ParseReader(r, Limits{MaxBytes: 64}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ParseReader over limit: %v", err)
	}
	v, err := ParseReader(strings.NewReader(`{"a":[1]}`), Limits{})
	if err != nil || render(v) != `{"a":[1]}` {
		t.Errorf("ParseReader: %v", err)
	}
	if _, err := ParseReader(iotest.ErrReader(errors.New("disk on fire")), Limits{}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("ParseReader read error: %v", err)
	}
}

func TestAccessors(t *testing.T) {
	v, err := Parse([]byte(`{"s":"x","n":12,"b":true,"a":[1,2],"o":{"k":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := v.Get("s").Str(); err != nil || s != "x" {
		t.Errorf("Str: %q %v", s, err)
	}
	if _, err := v.Get("n").Str(); !errors.Is(err, ErrType) {
		t.Errorf("Str of number: %v", err)
	}
	if _, err := v.Get("s").Int64(); !errors.Is(err, ErrType) {
		t.Errorf("Int64 of string: %v", err)
	}
	if _, err := v.Get("n").Bool(); !errors.Is(err, ErrType) {
		t.Errorf("Bool of number: %v", err)
	}
	if _, err := v.Get("b").Float64(); !errors.Is(err, ErrType) {
		t.Errorf("Float64 of bool: %v", err)
	}
	if b, err := v.Get("b").Bool(); err != nil || !b {
		t.Errorf("Bool: %v %v", b, err)
	}
	if v.Get("a").Len() != 2 || v.Get("a").Items()[1].Offset() != 32 {
		t.Errorf("array: len %d", v.Get("a").Len())
	}
	if v.Get("o").Get("k").Kind() != Null || v.Get("o").Get("zz") != nil {
		t.Error("nested Get")
	}
	if v.Get("a").Get("k") != nil || v.Get("a").Members() != nil || v.Items() != nil || v.Get("s").Len() != 0 {
		t.Error("kind-mismatched accessors must return nothing")
	}
	var nilV *Value
	if nilV.Get("x") != nil {
		t.Error("nil Get")
	}
	if Object.String() != "object" || Kind(99).String() != "Kind(99)" {
		t.Error("Kind.String")
	}
	e := &Error{Offset: 7, Path: "a.b", Msg: "m", Err: ErrSyntax}
	if e.Error() != "strictjson: byte 7 (at a.b): m" {
		t.Errorf("Error() = %q", e.Error())
	}
}
