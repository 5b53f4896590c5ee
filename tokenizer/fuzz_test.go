package tokenizer

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzEncoding is a small encoding built in code so that fuzzing needs no
// fixtures: all bytes plus a few multi-byte merges, and Kimi-style specials.
func fuzzEncoding(tb testing.TB, rule SplitRule, cuts bool) *Encoding {
	tb.Helper()
	toks := make([][]byte, 256)
	for i := range toks {
		toks[i] = []byte{byte(i)}
	}
	for _, s := range []string{"th", "he", "the", "in", "ing", "  ", "    ", "中", "文", "\xe4\xb8", "é", "'s", " a", "ab", "abab", "aa", "aaaa"} {
		toks = append(toks, []byte(s))
	}
	r, err := NewRanks(toks)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := New(Spec{Name: "fuzz", Ranks: r, Split: rule, KimiCuts: cuts,
		Specials: map[string]int{"[BOS]": 300, "[EOS]": 301, "<|im_end|>": 302}})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

var fuzzSeeds = []string{
	"", "hello world", "don't STOP'S it'ſ", " 中文 1〇〇〇 x々y", "a  \n  b\r\n\t x", "[BOS]hi<|im_end|>[EOS",
	"\u0301A! camelCase HTMLParser", "😀👍🏽 🇩🇪", "\x1c\x1c a", "abababab aaaa", "\xff\xfe bad", "\xe4\xb8",
	"x\u2028y\u00a0z\u3000", "١٢٣٤ ²½Ⅻ", "'ll 'VE 're", strings.Repeat("a", 300),
}

// FuzzEncode: arbitrary bytes never panic; valid UTF-8 round-trips in
// NoSpecial mode under every rule and both pipelines; invalid input is
// refused with the first bad offset; AllowSpecial output decodes back too.
func FuzzEncode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	var encs []*Encoding
	for _, rule := range []SplitRule{SplitKimi, SplitO200K, SplitCL100K} {
		encs = append(encs, fuzzEncoding(f, rule, false))
	}
	encs = append(encs, fuzzEncoding(f, SplitKimi, true))
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range encs {
			for _, mode := range []Mode{NoSpecial, AllowSpecial, RejectSpecial} {
				ids, err := e.Encode(s, mode)
				if !utf8.ValidString(s) {
					var ie *InvalidUTF8Error
					if !errors.As(err, &ie) || ie.Offset >= len(s) || !utf8.ValidString(s[:ie.Offset]) {
						t.Fatalf("invalid input: err %v", err)
					}
					continue
				}
				if mode == RejectSpecial {
					if err != nil && !errors.Is(err, ErrDisallowedSpecial) {
						t.Fatal(err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				back, err := e.DecodeBytes(ids)
				if err != nil || string(back) != s {
					t.Fatalf("%v %v: round trip %q -> %q (%v)", e.Split(), mode, s, back, err)
				}
			}
			pieces, err := e.Split().Split(s)
			if err == nil && strings.Join(pieces, "") != s {
				t.Fatal("pieces do not concatenate to the text")
			}
			if err == nil {
				for _, p := range pieces {
					if p == "" {
						t.Fatal("empty piece")
					}
				}
			}
		}
		// Decode of arbitrary bytes as one stream equals Decode.
		e := encs[0]
		ids := make([]int, len(s))
		for i := range s {
			ids[i] = int(s[i])
		}
		got := streamDecode(t, e, ids, nil)
		if want, _ := e.Decode(ids); got != want || !utf8.ValidString(want) {
			t.Fatalf("stream %q vs decode %q", got, want)
		}
	})
}

// FuzzParseRanks: arbitrary rank files never panic, and an accepted file
// satisfies the invariants.
func FuzzParseRanks(f *testing.F) {
	base := byteFile()
	f.Add([]byte(base))
	f.Add([]byte(base + b64("ab") + " 256\n"))
	f.Add([]byte(strings.ReplaceAll(base, "\n", "\r\n")))
	f.Add([]byte("IQ== 0\n"))
	f.Add([]byte(base + "YWJ= 256\n"))
	f.Add([]byte(base + b64("ab") + " 300\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRanks(data)
		if err != nil {
			var re *RankFileError
			if !errors.As(err, &re) {
				t.Fatalf("error of wrong type: %v", err)
			}
			return
		}
		if r.Len() < 256 {
			t.Fatalf("accepted %d ranks", r.Len())
		}
		for i := 0; i < r.Len(); i++ {
			tok, ok := r.Token(i)
			if !ok || len(tok) == 0 {
				t.Fatal("missing token")
			}
			if rk, ok := r.Rank(tok); !ok || rk != i {
				t.Fatalf("rank %d round trip gives %d", i, rk)
			}
		}
	})
}

// FuzzKimiConfig: arbitrary tokenizer_config.json text never panics.
func FuzzKimiConfig(f *testing.F) {
	r, err := ParseRanks([]byte(byteFile()))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"added_tokens_decoder": {"256": {"content": "[BOS]"}}}`))
	f.Add([]byte(`{"added_tokens_decoder": {"256": {"content": "[BOS]"}, "257": {"content": "BOS]["}}}`))
	f.Add([]byte(`{"a": [1, {"b": null}], "added_tokens_decoder": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := NewKimi(r, data)
		if err != nil {
			return
		}
		if e.VocabSize() != 512 || len(e.SpecialNames()) != 256 {
			t.Fatalf("vocab %d", e.VocabSize())
		}
	})
}
