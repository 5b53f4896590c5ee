package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// pyCuts is an independent transcription of tokenization_kimi.py's
// chunking: slice into 400,000-code-point chunks, then
// _split_whitespaces_or_nonwhitespaces with limit 25,000, over []rune.
func pyCuts(text string) []string {
	rs := []rune(text)
	var out []string
	if len(rs) == 0 {
		return []string{""}
	}
	isspace := func(r rune) bool {
		switch {
		case r >= 0x09 && r <= 0x0d, r >= 0x1c && r <= 0x20, r == 0x85, r == 0xa0, r == 0x1680,
			r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
			return true
		}
		return false
	}
	for i := 0; i < len(rs); i += KimiChunkCodePoints {
		s := rs[i:min(i+KimiChunkCodePoints, len(rs))]
		cur, curSpace, start := 0, isspace(s[0]), 0
		for j := range s {
			now := isspace(s[j])
			if curSpace != now {
				cur, curSpace = 1, now
			} else {
				cur++
				if cur > KimiMaxRun {
					out = append(out, string(s[start:j]))
					start, cur = j, 1
				}
			}
		}
		out = append(out, string(s[start:]))
	}
	return out
}

// kimiOn builds the kimi-o200k fixture encoding with the Kimi pipeline.
func kimiOn(t testing.TB, fe *fixtureEncoding) *Encoding {
	e, err := New(Spec{Name: "kimi-cuts", Ranks: fe.enc.Ranks(), Split: SplitKimi, Specials: fe.Specials, KimiCuts: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func fixtureByName(t testing.TB, name string) *fixtureEncoding {
	for _, fe := range loadFixtures(t).encs {
		if fe.name == name {
			return fe
		}
	}
	t.Fatalf("no %s in encodings.json", name)
	return nil
}

// TestKimiCuts checks the Kimi pipeline against pyCuts + the oracle-verified
// tiktoken pipeline on every fixture case and on texts built to straddle the
// 25,000 and 400,000 cuts.
func TestKimiCuts(t *testing.T) {
	fe := fixtureByName(t, "kimi-o200k")
	plain, cuts := fe.enc, kimiOn(t, fe)
	check := func(name, text string, mode Mode) []int {
		t.Helper()
		got, err := cuts.Encode(text, mode)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var want []int
		for _, p := range pyCuts(text) {
			ids, err := plain.Encode(p, mode)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, ids...)
		}
		if i, ok := equalInts(got, want); !ok {
			t.Errorf("%s: Kimi pipeline differs from cut-then-encode at id %d", name, i)
		}
		return got
	}
	cutCases := 0
	for _, c := range loadFixtures(t).cases {
		if len(pyCuts(c.Text)) > 1 {
			cutCases++
		}
		check("case "+c.ID, c.Text, NoSpecial)
		check("case "+c.ID+" specials", c.Text, AllowSpecial)
	}
	if cutCases == 0 {
		t.Error("no fixture case exercises the 25,000 cut")
	}
	bos := fe.Specials["[BOS]"]
	// §10.6: 24,998 'a's then [BOS]: the cut falls between "[B" and "OS]".
	ids := check("25k straddle", strings.Repeat("a", 24998)+"[BOS]", AllowSpecial)
	for _, id := range ids {
		if id == bos {
			t.Error("[BOS] recognised across a 25,000 cut")
		}
	}
	ids = check("25k before", strings.Repeat("a", 24990)+"[BOS]", AllowSpecial)
	if ids[len(ids)-1] != bos {
		t.Error("[BOS] not recognised before the cut")
	}
	// 400,000-code-point chunk boundary inside [BOS] (runs stay short).
	long := strings.Repeat("a ", 199999) + "[BOS] x"
	ids = check("400k straddle", long, AllowSpecial)
	for _, id := range ids {
		if id == bos {
			t.Error("[BOS] recognised across a 400,000 chunk boundary")
		}
	}
	check("400k multibyte", strings.Repeat("é ", 200001)+"中文", NoSpecial)
	check("long spaces", strings.Repeat(" ", 60001)+"x", NoSpecial)
	check("long newlines", strings.Repeat("\n", 25001), NoSpecial)
	check("isspace-only class", strings.Repeat("\x1c", 25001)+"a", NoSpecial)
}

func kimiConfig(entries map[int]string) []byte {
	var sb strings.Builder
	sb.WriteString(`{"model_max_length": 1000, "added_tokens_decoder": {`)
	first := true
	for id, name := range entries {
		if !first {
			sb.WriteString(",")
		}
		first = false
		fmt.Fprintf(&sb, "%q: {\"content\": %q, \"special\": true, \"lstrip\": false}", fmt.Sprint(id), name)
	}
	sb.WriteString(`}, "tokenizer_class": "TikTokenTokenizer"}`)
	return []byte(sb.String())
}

func TestNewKimi(t *testing.T) {
	r, err := ParseRanks([]byte(byteFile() + b64("ab") + " 256\n"))
	if err != nil {
		t.Fatal(err)
	}
	n := r.Len()
	enc, err := NewKimi(r, kimiConfig(map[int]string{n: "[BOS]", n + 1: "[EOS]", n + 255: "[PAD]"}))
	if err != nil {
		t.Fatal(err)
	}
	if enc.VocabSize() != n+256 {
		t.Errorf("VocabSize %d", enc.VocabSize())
	}
	sp := enc.SpecialTokens()
	if len(sp) != 256 || sp["[BOS]"] != n || sp["[PAD]"] != n+255 || sp[fmt.Sprintf("<|reserved_token_%d|>", n+2)] != n+2 {
		t.Errorf("specials wrong: %d entries", len(sp))
	}
	ids, err := enc.Encode("ab[BOS]<|reserved_token_259|>", AllowSpecial)
	if err != nil || fmt.Sprint(ids) != fmt.Sprint([]int{256, n, 259}) {
		t.Errorf("Encode = %v, %v", ids, err)
	}
	ids, err = enc.Encode("ab[BOS]", NoSpecial)
	if err != nil || fmt.Sprint(ids) != fmt.Sprint([]int{256, '[', 'B', 'O', 'S', ']'}) {
		t.Errorf("NoSpecial = %v, %v", ids, err)
	}
	if _, err := enc.Encode("x [EOS]", RejectSpecial); !errors.Is(err, ErrDisallowedSpecial) {
		t.Errorf("RejectSpecial: %v", err)
	}
	var de *DisallowedSpecialError
	if _, err := enc.Encode("x [EOS]", RejectSpecial); !errors.As(err, &de) || de.Offset != 2 || de.Name != "[EOS]" {
		t.Errorf("RejectSpecial detail: %v", err)
	}
	ids, err = enc.EncodeWith("[BOS][EOS]", []string{"[BOS]"}, false)
	if err != nil || ids[0] != n || len(ids) < 3 {
		t.Errorf("EncodeWith = %v, %v", ids, err)
	}
	if _, err := enc.EncodeWith("[BOS][EOS]", []string{"[BOS]"}, true); !errors.Is(err, ErrDisallowedSpecial) {
		t.Errorf("EncodeWith reject: %v", err)
	}
	if _, err := enc.EncodeWith("x", []string{"[NOPE]"}, true); err == nil {
		t.Error("unknown allowed name accepted")
	}

	refuse := []struct {
		name string
		cfg  string
		msg  string
	}{
		{"below range", string(kimiConfig(map[int]string{n - 1: "[X]"})), "outside"},
		{"above range", string(kimiConfig(map[int]string{n + 256: "[X]"})), "outside"},
		{"empty name", string(kimiConfig(map[int]string{n: ""})), "empty name"},
		{"duplicate name", string(kimiConfig(map[int]string{n: "[X]", n + 1: "[X]"})), "same name"},
		{"reserved clash", string(kimiConfig(map[int]string{n: fmt.Sprintf("<|reserved_token_%d|>", n+1)})), "same name"},
		{"ranked token", string(kimiConfig(map[int]string{n: "ab"})), "ranked token"},
		{"inside", string(kimiConfig(map[int]string{n: "[EOS]", n + 1: "x[EOS]y"})), "occurs inside"},
		{"prefix", string(kimiConfig(map[int]string{n: "[EO", n + 1: "[EOS]"})), "occurs inside"},
		{"suffix-prefix", string(kimiConfig(map[int]string{n: "<a|", n + 1: "|b>"})), "is the start of"},
		{"duplicate key", `{"added_tokens_decoder": {"256": {"content": "[A]"}, "256": {"content": "[B]"}}}`, "duplicate"},
		{"duplicate content", `{"added_tokens_decoder": {"256": {"content": "[A]", "content": "[B]"}}}`, "duplicate"},
		{"duplicate top", `{"added_tokens_decoder": {}, "added_tokens_decoder": {}}`, "duplicate"},
		{"duplicate nested", `{"x": {"a": 1, "a": 2}, "added_tokens_decoder": {}}`, "duplicate"},
		{"id not decimal", `{"added_tokens_decoder": {"0x100": {"content": "[A]"}}}`, "canonical decimal"},
		{"id leading zero", `{"added_tokens_decoder": {"0256": {"content": "[A]"}}}`, "canonical decimal"},
		{"entry not object", `{"added_tokens_decoder": {"256": "[A]"}}`, "not an object"},
		{"lone surrogate", `{"added_tokens_decoder": {"256": {"content": "\ud800"}}}`, "surrogate"},
		{"no content", `{"added_tokens_decoder": {"256": {"special": true}}}`, "no content"},
		{"content not string", `{"added_tokens_decoder": {"256": {"content": 5}}}`, "not a string"},
		{"no decoder", `{"model_max_length": 5}`, "no added_tokens_decoder"},
		{"not json", `{"added_tokens_decoder": `, "tokenizer_config.json"},
		{"trailing", `{"added_tokens_decoder": {}} {}`, "tokenizer_config.json"},
		{"top not object", `[1]`, "not an object"},
	}
	for _, c := range refuse {
		_, err := NewKimi(r, []byte(c.cfg))
		if !errors.Is(err, ErrSpecials) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err %v, want ErrSpecials containing %q", c.name, err, c.msg)
		}
	}
}

func TestLoadKimiFiles(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiktoken.model")
	cfg := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(model, []byte(byteFile()+b64("ab")+" 257\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, kimiConfig(map[int]string{258: "[BOS]"}), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadKimi(model, cfg)
	var re *RankFileError
	if !errors.As(err, &re) || re.Line != 257 || !strings.Contains(err.Error(), model) {
		t.Fatalf("gap not refused with file and line: %v", err)
	}
	if err := os.WriteFile(model, []byte(byteFile()+b64("ab")+" 256\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	enc, err := LoadKimi(model, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if enc.Ranks().IsKimiReference() || enc.IsKimiReference() {
		t.Error("digest mismatch not reported")
	}
	if !utf8.ValidString(enc.SpecialNames()[0]) || enc.SpecialNames()[1] != "[BOS]" {
		t.Errorf("names %q", enc.SpecialNames()[:2])
	}
}

func TestSpecialsOverlapRules(t *testing.T) {
	r, err := ParseRanks([]byte(byteFile()))
	if err != nil {
		t.Fatal(err)
	}
	ok := []map[string]int{
		{"<|endoftext|>": 256, "<|fim_prefix|>": 257, "<|endofprompt|>": 258},
		{"aXa": 256}, // a name overlapping only itself is harmless
		{},
	}
	for _, sp := range ok {
		if _, err := New(Spec{Ranks: r, Split: SplitCL100K, Specials: sp}); err != nil {
			t.Errorf("%v refused: %v", sp, err)
		}
	}
	bad := []map[string]int{
		{"<ab>": 256, "b>": 257},
		{"<abc": 256, "bc>": 257},
		{"<x>": 10},
		{"x": 256},
		{"<é>": 256, "<\xff>": 257},
		{"<a>": 256, "<b>": 256},
		{"aXa": 256, "aY": 257}, // aXa overlapping itself is fine, but its end "a" starts aY
	}
	for _, sp := range bad {
		if _, err := New(Spec{Ranks: r, Split: SplitCL100K, Specials: sp}); err == nil {
			t.Errorf("%v accepted", sp)
		}
	}
}

// TestKimiK3Names loads the K3 special layout of §10.2 (offsets from N
// preserved) on a toy vocabulary: the real names pass the overlap rules and
// each encodes to its id in AllowSpecial mode.
func TestKimiK3Names(t *testing.T) {
	r, err := ParseRanks([]byte(byteFile()))
	if err != nil {
		t.Fatal(err)
	}
	n := r.Len()
	names := map[int]string{
		0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>", 5: "<|sep|>",
		6: "[start_header_id]", 7: "[end_header_id]", 9: "[EOT]",
		18: "<|media_begin|>", 19: "<|media_content|>", 20: "<|media_end|>", 21: "<|media_pad|>",
		65: "<osagent_mode>", 254: "[UNK]", 255: "[PAD]",
	}
	cfg := map[int]string{}
	for off, name := range names {
		cfg[n+off] = name
	}
	enc, err := NewKimi(r, kimiConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for off, name := range names {
		ids, err := enc.Encode("x"+name+"y", AllowSpecial)
		if err != nil || len(ids) != 3 || ids[1] != n+off {
			t.Errorf("%s: %v %v", name, ids, err)
		}
	}
	reserved := fmt.Sprintf("<|reserved_token_%d|>", n+8)
	if ids, _ := enc.Encode(reserved, AllowSpecial); len(ids) != 1 || ids[0] != n+8 {
		t.Errorf("reserved name: %v", ids)
	}
}
