package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/k3-project/k3/tokenizer"
)

// testTok is a Kimi-layout tokenizer directory written in the real file formats: 256 single-byte
// ranks in a scrambled order (so an id is not its byte), two merges, then the 256 specials.
type testTok struct {
	dir    string
	byteAt [256]byte // byteAt[rank] for the single-byte ranks 0..255
	n      int       // number of ranks; specials start here
}

// Merged tokens and named specials of the test vocabulary.
const (
	tokAB  = 256 // "ab"
	tokHE  = 257 // "he"
	tokBOS = 258
	tokEOS = 259
	tokEOM = 260
)

func writeTestTok(t *testing.T) *testTok {
	t.Helper()
	tk := &testTok{dir: t.TempDir(), n: 258}
	var rank strings.Builder
	for r := range 256 {
		tk.byteAt[r] = byte((r*167 + 13) % 256) // 167 is odd, so this permutes the bytes
		fmt.Fprintf(&rank, "%s %d\n", base64.StdEncoding.EncodeToString([]byte{tk.byteAt[r]}), r)
	}
	fmt.Fprintf(&rank, "%s %d\n", base64.StdEncoding.EncodeToString([]byte("ab")), tokAB)
	fmt.Fprintf(&rank, "%s %d\n", base64.StdEncoding.EncodeToString([]byte("he")), tokHE)
	cfg := map[string]any{
		"added_tokens_decoder": map[string]any{
			strconv.Itoa(tokBOS): map[string]any{"content": "[BOS]", "special": true},
			strconv.Itoa(tokEOS): map[string]any{"content": "[EOS]", "special": true},
			strconv.Itoa(tokEOM): map[string]any{"content": "<|end_of_msg|>", "special": true},
		},
		"model_max_length": 1048576,
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tk.dir, "tiktoken.model"), []byte(rank.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tk.dir, "tokenizer_config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return tk
}

// rankOf is the id of a single byte, computed from the permutation, not by the tokenizer.
func (tk *testTok) rankOf(b byte) int {
	for r, x := range tk.byteAt {
		if x == b {
			return r
		}
	}
	panic("unreachable: every byte has a rank")
}

// textOf decodes single-byte ids from the permutation with Python's errors="replace".
func (tk *testTok) textOf(t *testing.T, ids []int) string {
	t.Helper()
	var b []byte
	for _, id := range ids {
		if id < 0 || id >= 256 {
			t.Fatalf("generated id %d is not a single-byte token", id)
		}
		b = append(b, tk.byteAt[id])
	}
	return tokenizer.ReplaceInvalidUTF8(b)
}

// TestPromptText: --prompt and --prompt-file encode the text as the Kimi reference does and
// generated_text is the complete decoding of generated_ids; --ids with --tok decodes the same.
func TestPromptText(t *testing.T) {
	dir := synthTiny(t)
	tk := writeTestTok(t)
	tmp := t.TempDir()
	const text = "xyz Q!\n"
	want := make([]int, len(text))
	for i := range len(text) {
		want[i] = tk.rankOf(text[i])
	}
	pf := filepath.Join(tmp, "prompt.txt")
	if err := os.WriteFile(pf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	enc, err := tokenizer.LoadKimi(filepath.Join(tk.dir, "tiktoken.model"), filepath.Join(tk.dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	idList := strings.Trim(jsonText(want), "[]")
	var full []string
	for i, src := range [][]string{{"--prompt", text}, {"--prompt-file", pf}, {"--ids", idList}} {
		out := filepath.Join(tmp, "r"+strconv.Itoa(i)+".json")
		args := append([]string{dir, "--tok", tk.dir, "--gen", "6", "--no-stop", "--incremental", "--out", out}, src...)
		code, _, stderr := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", src[0], code, stderr)
		}
		if !strings.Contains(stderr, "not the released Kimi rank file") {
			t.Errorf("%s: no warning about the non-reference rank file: %s", src[0], stderr)
		}
		r := readReport(t, out)
		if got := ints(t, r["prompt_ids"]); !slices.Equal(got, want) {
			t.Errorf("%s: prompt_ids %v, want %v", src[0], got, want)
		}
		gen := ints(t, r["generated_ids"])
		if len(gen) != 6 {
			t.Fatalf("%s: generated %v", src[0], gen)
		}
		txt, ok := r["generated_text"].(string)
		if !ok {
			t.Fatalf("%s: generated_text %v is not a string", src[0], r["generated_text"])
		}
		dec, err := enc.Decode(gen)
		if err != nil {
			t.Fatal(err)
		}
		if txt != dec || txt != tk.textOf(t, gen) {
			t.Errorf("%s: generated_text %q, tokenizer decodes %q, permutation gives %q", src[0], txt, dec, tk.textOf(t, gen))
		}
		if got := tablePieces(t, stderr); got != txt {
			t.Errorf("%s: the step table's pieces join to %q, generated_text is %q", src[0], got, txt)
		}
		full = append(full, jsonText(r["full_ids"]))
	}
	if full[0] != full[1] || full[0] != full[2] {
		t.Errorf("the three prompt sources disagree: %v", full)
	}
	// Without --tok the model directory's own tokenizer (k3 synth wrote one) decodes the output
	// (issue 25: --tok defaults to the model directory when it holds a tokenizer).
	out := filepath.Join(tmp, "plain.json")
	if code, _, stderr := runCLI(t, dir, "--ids", idList, "--gen", "2", "--out", out); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	own, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := readReport(t, out)
	if want, err := own.Decode(ints(t, r["generated_ids"])); err != nil || r["generated_text"] != want {
		t.Errorf("generated_text without --tok: %v, the model directory's tokenizer decodes %q (%v)", r["generated_text"], want, err)
	}
}

// tablePieces joins the quoted text column of the per-step table and the held-back tail.
func tablePieces(t *testing.T, stderr string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(line, "step ") && !strings.HasPrefix(strings.TrimSpace(line), "end of output") {
			continue
		}
		i := strings.IndexByte(line, '"')
		if i < 0 {
			t.Fatalf("step line without text: %q", line)
		}
		s, err := strconv.Unquote(line[i:])
		if err != nil {
			t.Fatalf("step line %q: %v", line, err)
		}
		b.WriteString(s)
	}
	return b.String()
}

// TestPromptValidation: prompt ids must lie in the model's vocabulary (a merged token and a
// special name encode to ids >= 256 here), and an empty prompt (flag or file) is refused; all exit 2.
func TestPromptValidation(t *testing.T) {
	dir := synthTiny(t)
	tk := writeTestTok(t)
	cases := []struct {
		prompt, want string
	}{
		{"xab", "id " + strconv.Itoa(tokAB)},
		{"x[BOS]y", "id " + strconv.Itoa(tokBOS)}, // AllowSpecial: the name is the special's id
		{"", "empty value"},                       // refused by the flag parser, before any tokenizer is read
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, dir, "--tok", tk.dir, "--prompt", c.prompt, "--out", filepath.Join(t.TempDir(), "r.json"))
		if code != exitUsage || !strings.Contains(stderr, "--prompt") || !strings.Contains(stderr, c.want) {
			t.Errorf("--prompt %q: exit %d, %s; want 2 naming --prompt and %q", c.prompt, code, stderr, c.want)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, dir, "--tok", tk.dir, "--prompt-file", empty); code != exitUsage || !strings.Contains(stderr, "--prompt-file") || !strings.Contains(stderr, "no tokens") {
		t.Errorf("empty prompt file: exit %d, %s", code, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, []byte("x\xffy"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, dir, "--tok", tk.dir, "--prompt-file", bad); code != exitUsage || !strings.Contains(stderr, "UTF-8") {
		t.Errorf("invalid UTF-8 prompt file: exit %d, %s", code, stderr)
	}
}

// TestPromptUsage: prompt-source conflicts, a text prompt without --tok and an unreadable prompt
// file are usage errors naming the flags, decided before any model or tokenizer is read.
func TestPromptUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.txt")
	cases := []struct {
		args  []string
		names []string
	}{
		{[]string{"m", "--prompt", "hi"}, []string{"--prompt", "--tok"}},
		{[]string{"m", "--prompt-file", missing, "--tok", "t"}, []string{"--prompt-file", "absent.txt"}},
		{[]string{"m", "--ids", "1", "--prompt", "hi", "--tok", "t"}, []string{"--ids", "--prompt"}},
		{[]string{"m", "--prompt", "hi", "--prompt-file", "f", "--tok", "t"}, []string{"--prompt", "--prompt-file"}},
		{[]string{"m", "--tok", "t"}, []string{"--ids", "--prompt"}},
		{[]string{"m", "--prompt", "hi", "--tok", ""}, []string{"--tok"}},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, c.args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want 2: %s", c.args, code, stderr)
		}
		for _, n := range c.names {
			if !strings.Contains(stderr, n) {
				t.Errorf("%q: message %q does not name %s", c.args, stderr, n)
			}
		}
	}
}

// TestTokenizerLoadErrors: a tokenizer directory that cannot be loaded is a runtime failure (1)
// with a message naming the problem.
func TestTokenizerLoadErrors(t *testing.T) {
	dir := synthTiny(t)
	empty := t.TempDir()
	if code, _, stderr := runCLI(t, dir, "--tok", empty, "--prompt", "x"); code != exitRuntime || !strings.Contains(stderr, "tiktoken.model") {
		t.Errorf("empty --tok directory: exit %d, %s", code, stderr)
	}
	tk := writeTestTok(t)
	// Drop the line of rank 5: ranks are no longer dense and a byte is missing.
	b, err := os.ReadFile(filepath.Join(tk.dir, "tiktoken.model"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(filepath.Join(tk.dir, "tiktoken.model"), []byte(strings.Join(append(lines[:5], lines[6:]...), "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, dir, "--tok", tk.dir, "--ids", "1"); code != exitRuntime || !strings.Contains(stderr, "--tok") || !strings.Contains(stderr, "rank") {
		t.Errorf("bad rank file: exit %d, %s", code, stderr)
	}
}

// withEOS links the tiny model's weights into a new directory whose config.json carries
// eos_token_id.
func withEOS(t *testing.T, src string, eos int) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "config.json" {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	const anchor = `"model_type": "kimi_k3",`
	if !strings.Contains(string(cfg), anchor) {
		t.Fatalf("config.json lacks %s", anchor)
	}
	cfg = []byte(strings.Replace(string(cfg), anchor, anchor+` "eos_token_id": `+strconv.Itoa(eos)+`,`, 1))
	if err := os.WriteFile(filepath.Join(dst, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestDefaultStop: without --stop-ids the stop set is the tokenizer's [EOS] and <|end_of_msg|>
// plus the config's eos_token_id, and generation stops on it; --stop-ids replaces it and
// --no-stop empties it; without --tok only the config's eos applies.
func TestDefaultStop(t *testing.T) {
	tiny := synthTiny(t)
	tk := writeTestTok(t)
	tmp := t.TempDir()
	args := []string{"--tok", tk.dir, "--ids", "5,6,7", "--gen", "6"}
	free := filepath.Join(tmp, "free.json")
	if code, _, stderr := runCLI(t, append([]string{tiny, "--no-stop", "--out", free}, args...)...); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := readReport(t, free)
	gen := ints(t, r["generated_ids"])
	if got := ints(t, r["stop_ids"]); len(got) != 0 {
		t.Errorf("--no-stop: stop_ids %v", got)
	}
	eos := gen[2]
	unused := 0
	for slices.Contains(gen, unused) {
		unused++
	}
	model := withEOS(t, tiny, eos)
	cases := []struct {
		extra    []string
		wantStop []int
		wantLen  int // the stop id is the first occurrence of eos in gen, or all 6 tokens
	}{
		// The test tokenizer's [EOS] and <|end_of_msg|> lie outside the tiny vocabulary: they
		// cannot be generated, so the default leaves them out (and says so).
		{nil, []int{eos}, slices.Index(gen, eos) + 1},
		{[]string{"--stop-ids", strconv.Itoa(unused)}, []int{unused}, 6},
		{[]string{"--no-stop"}, []int{}, 6},
	}
	for i, c := range cases {
		out := filepath.Join(tmp, "s"+strconv.Itoa(i)+".json")
		a := append(append([]string{model, "--out", out}, args...), c.extra...)
		code, _, stderr := runCLI(t, a...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.extra, code, stderr)
		}
		if c.extra == nil && !strings.Contains(stderr, "default stop ids ["+strconv.Itoa(tokEOS)+" "+strconv.Itoa(tokEOM)+"] are outside the vocabulary") {
			t.Errorf("no note about the unreachable default stop ids: %s", stderr)
		}
		r := readReport(t, out)
		if got := ints(t, r["stop_ids"]); !slices.Equal(got, c.wantStop) {
			t.Errorf("%v: stop_ids %v, want %v", c.extra, got, c.wantStop)
		}
		got := ints(t, r["generated_ids"])
		if !slices.Equal(got, gen[:c.wantLen]) {
			t.Errorf("%v: generated %v, want %v", c.extra, got, gen[:c.wantLen])
		}
		if want := tk.textOf(t, got); r["generated_text"] != want {
			t.Errorf("%v: generated_text %v, want %q", c.extra, r["generated_text"], want)
		}
	}
	// An explicit stop id outside the vocabulary is refused before the model loads.
	if code, _, stderr := runCLI(t, append([]string{model, "--out", filepath.Join(tmp, "x.json"), "--stop-ids", "300"}, args...)...); code != exitUsage ||
		!strings.Contains(stderr, "--stop-ids: element 0: id 300 is outside the vocabulary [0, 256)") {
		t.Errorf("--stop-ids 300: exit %d: %s", code, stderr)
	}
	// Without a tokenizer the config's eos alone is the default.
	out := filepath.Join(tmp, "notok.json")
	if code, _, stderr := runCLI(t, model, "--ids", "5,6,7", "--gen", "6", "--out", out); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := ints(t, readReport(t, out)["stop_ids"]); !slices.Equal(got, []int{eos}) {
		t.Errorf("without --tok: stop_ids %v, want [%d]", got, eos)
	}
}
