package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	`{"text_config":{"hidden_size":128,"linear_attn_config":{"num_heads":4,"full_attn_layers":[4,8,12,13]}}}`,
	`{"a":1,"a":2}`,
	`[1.0, -0, 1e3, 1.5e-7, 9223372036854775808, "x\u00e9\ud83d\ude00", true, false, null]`,
	`{"k": "\ud800"}`,
	"\"\xff\"",
	`[1,]`,
	`{"a":NaN}`,
	`01`,
	`[[[[[[[[[[]]]]]]]]]]`,
	`{"":{"":[{}]}}`,
	"\ufeff{}",
	`"\u0000\/\b"`,
	` 7 `,
}

// FuzzParse: the parser never panics; whatever it accepts, encoding/json
// accepts with the same value; whatever encoding/json accepts, the parser
// accepts unless it is one of the things this package refuses on purpose.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseLimits(data, Limits{MaxDepth: 64})
		std, stdErr := stdDecode(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > int64(len(data)) {
				t.Fatalf("error %v is not an *Error with an in-range offset", err)
			}
			if stdErr == nil && !errors.Is(err, ErrDuplicateKey) && !errors.Is(err, ErrInvalidUTF8) &&
				!errors.Is(err, ErrLoneSurrogate) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("refused %q (%v) which encoding/json accepts", data, err)
			}
			return
		}
		if stdErr != nil {
			t.Fatalf("accepted %q which encoding/json refuses: %v", data, stdErr)
		}
		if !reflect.DeepEqual(toAny(v), std) {
			t.Fatalf("%q: parsed %#v, encoding/json %#v", data, toAny(v), std)
		}
		// Rendering the tree gives JSON that parses to the same tree.
		out := render(v)
		v2, err := Parse([]byte(out))
		if err != nil || render(v2) != out {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		walk(t, v)
	})
}

// walk exercises the conversions on every number and string; they must
// never panic and must agree with each other and with encoding/json.
func walk(t *testing.T, v *Value) {
	switch v.Kind() {
	case Number:
		text, _ := v.NumberText()
		n, ierr := v.Int64()
		f, ferr := v.Float64()
		if ierr == nil && ferr == nil && float64(n) != f {
			// Only large integers may differ, and then by float64 rounding alone.
			if n > -1<<53 && n < 1<<53 {
				t.Fatalf("%s: Int64 %d but Float64 %v", text, n, f)
			}
		}
		var std int64
		if jerr := json.Unmarshal([]byte(text), &std); jerr == nil && (ierr != nil || std != n) {
			t.Fatalf("%s: encoding/json int64 %d, Int64 %d, %v", text, std, n, ierr)
		}
	case String:
		s, _ := v.Str()
		if got, err := Unquote(AppendQuote(nil, s)); err != nil || got != s {
			t.Fatalf("string %q does not round-trip: %q %v", s, got, err)
		}
	case Array:
		for _, it := range v.Items() {
			walk(t, it)
		}
	case Object:
		for _, m := range v.Members() {
			if v.Get(m.Key) != m.Value {
				t.Fatalf("Get(%q) does not find its member", m.Key)
			}
			walk(t, m.Value)
		}
	}
}

// FuzzUnquote: Unquote never panics and agrees with encoding/json on every
// literal both accept.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\u00e9\n"`, "\"\xe9\"", `"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Unquote(data)
		var std string
		stdErr := json.Unmarshal(data, &std)
		if err != nil {
			if stdErr == nil && !errors.Is(err, ErrInvalidUTF8) && !errors.Is(err, ErrLoneSurrogate) &&
				strings.TrimSpace(string(data)) == string(data) {
				t.Fatalf("Unquote refused %q (%v) which encoding/json accepts", data, err)
			}
			return
		}
		if stdErr != nil || std != s {
			t.Fatalf("Unquote(%q) = %q; encoding/json %q, %v", data, s, std, stdErr)
		}
	})
}
