package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// shared is a directory the tests of this package make once and share; TestMain removes it.
type shared struct {
	once sync.Once
	tmp  string // the temporary directory, removed when the tests end
	path string
	err  error
}

// sharedDirs are the directories that TestMain removes.
var sharedDirs []*shared

// get makes the directory on first use, as fill(a new temporary directory) gives it, and
// returns it; a failure to make it fails every test that asks.
func (s *shared) get(t *testing.T, fill func(tmp string) (string, error)) string {
	t.Helper()
	s.once.Do(func() {
		s.tmp, s.err = os.MkdirTemp("", "k3-cli-test-*")
		if s.err != nil {
			return
		}
		sharedDirs = append(sharedDirs, s)
		s.path, s.err = fill(s.tmp)
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.path
}

var tiny shared

// synthTiny writes one synthetic tiny model shared by the tests of this package.
func synthTiny(t *testing.T) string {
	t.Helper()
	return tiny.get(t, func(tmp string) (string, error) {
		dir := filepath.Join(tmp, "tiny")
		return dir, checkpoint.Synthesize(dir, "tiny", 3)
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range sharedDirs {
		os.RemoveAll(s.tmp)
	}
	os.Exit(code)
}

// TestUsageErrors: malformed numbers and flags exit 2 naming the flag, before any model is read
// (the C CLI turned --ids abc into 32,768 zero ids).
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"m", "--ids", "abc"}, "--ids"},
		{[]string{"m", "--ids", "1,,2"}, "--ids"},
		{[]string{"m", "--ids", "1,-2"}, "--ids"},
		{[]string{"m", "--ids", "1.5"}, "--ids"},
		{[]string{"m", "--ids", ""}, "--ids"},
		{[]string{"m", "--ids", "99999999999999999999"}, "--ids"},
		{[]string{"m", "--ids", "1", "--gen", "x"}, "--gen"},
		{[]string{"m", "--ids", "1", "--gen", "-1"}, "--gen"},
		{[]string{"m", "--ids", "1", "--gen", "4097"}, "--gen"},
		{[]string{"m", "--ids", "1", "--gen", "0x10"}, "--gen"},
		{[]string{"m", "--ids", "1", "--threads", "0"}, "--threads"},
		{[]string{"m", "--ids", "1", "--threads", "two"}, "--threads"},
		{[]string{"m", "--ids", "1", "--stop-ids", "a"}, "--stop-ids"},
		{[]string{"m", "--ids", "1", "--stop-ids", "1", "--no-stop"}, "--stop-ids"},
		{[]string{"m", "--ids", "1", "--bogus"}, "--bogus"},
		{[]string{"m", "--ids", "1", "--incremental=yes"}, "--incremental"},
		{[]string{"m", "--ids"}, "--ids"},
		{[]string{"m", "--ids", "1", "--tf-check"}, "--tf-check"},
		{[]string{"m"}, "--ids"},
		{[]string{"m", "n", "--ids", "1"}, "model directory"},
		{[]string{"synth", "tiny"}, "k3 synth"},
		{[]string{"synth", "huge", "dir"}, "unknown geometry"},
		{[]string{"synth", "tiny", "dir", "--seed", "-3"}, "--seed"},
		{[]string{"demo", "--gen", "many"}, "--gen"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.flag) {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %s", c.args, code, stderr, c.flag)
		}
	}
	if code, _, _ := runCLI(t); code != exitUsage {
		t.Errorf("no arguments: exit %d", code)
	}
}

func TestInfoCommands(t *testing.T) {
	for _, a := range []string{"--help", "-h", "--version", "--list-geometries"} {
		code, out, _ := runCLI(t, a)
		if code != exitOK || out == "" {
			t.Errorf("%s: exit %d, output %q", a, code, out)
		}
	}
	_, out, _ := runCLI(t, "--list-geometries")
	for _, g := range []string{"tiny", "perf", "k3"} {
		if !strings.Contains(out, g) {
			t.Errorf("--list-geometries lacks %s", g)
		}
	}
}

func readReport(t *testing.T, path string) map[string]any {
	t.Helper()
	return testkit.ReadJSON[map[string]any](t, path)
}

func ints(t *testing.T, v any) []int {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not an array", v)
	}
	out := make([]int, len(a))
	for i, x := range a {
		out[i] = int(x.(float64))
	}
	return out
}

// TestGenZero: --gen 0 is valid and writes seconds_per_token as null, never NaN.
func TestGenZero(t *testing.T) {
	dir := synthTiny(t)
	out := filepath.Join(t.TempDir(), "r.json")
	dump := filepath.Join(t.TempDir(), "logits.f32")
	code, _, stderr := runCLI(t, dir, "--ids", "1,2,3", "--gen", "0", "--out", out, "--dump-logits", dump)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := readReport(t, out)
	if v, ok := r["seconds_per_token"]; !ok || v != nil {
		t.Errorf("seconds_per_token = %v (present %v), want null", v, ok)
	}
	if len(ints(t, r["generated_ids"])) != 0 || len(ints(t, r["full_ids"])) != 3 {
		t.Errorf("report %v", r)
	}
	for _, k := range []string{"prompt_ids", "layers", "wall_seconds", "peak_rss_bytes", "generated_text", "layers_requested"} {
		if _, ok := r[k]; !ok {
			t.Errorf("report lacks %s", k)
		}
	}
	if b, err := os.ReadFile(dump); err != nil || len(b) != 4*256 {
		t.Errorf("--dump-logits with --gen 0: %d bytes, %v", len(b), err)
	}
	if r["peak_rss_bytes"].(float64) <= 0 {
		t.Errorf("peak_rss_bytes %v", r["peak_rss_bytes"])
	}
}

// TestRunModes: full recompute and --incremental produce the same ids; --dump-logits writes V
// little-endian floats; --stop-ids stops right after the stop id.
func TestRunModes(t *testing.T) {
	dir := synthTiny(t)
	tmp := t.TempDir()
	var got [2][]int
	for i, mode := range [][]string{{"--full-recompute"}, nil} {
		out := filepath.Join(tmp, "r"+strconv.Itoa(i)+".json")
		args := append([]string{"run", dir, "--ids", "5,6,7", "--gen", "6", "--no-stop", "--threads", "2", "--out", out,
			"--dump-logits", filepath.Join(tmp, "l"+strconv.Itoa(i))}, mode...)
		if code, _, stderr := runCLI(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		r := readReport(t, out)
		got[i] = ints(t, r["generated_ids"])
		if r["seconds_per_token"] == nil {
			t.Error("seconds_per_token is null after generating")
		}
	}
	if len(got[0]) != 6 || jsonText(got[0]) != jsonText(got[1]) {
		t.Errorf("full recompute %v, incremental %v", got[0], got[1])
	}
	l0, _ := os.ReadFile(filepath.Join(tmp, "l0"))
	l1, _ := os.ReadFile(filepath.Join(tmp, "l1"))
	if len(l0) != 4*256 || !bytes.Equal(l0, l1) {
		t.Errorf("dumped logits: %d and %d bytes, equal %v", len(l0), len(l1), bytes.Equal(l0, l1))
	}
	out := filepath.Join(tmp, "stop.json")
	stop := strconv.Itoa(got[0][2])
	if code, _, stderr := runCLI(t, dir, "--ids", "5,6,7", "--gen", "6", "--stop-ids", stop, "--out", out); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := readReport(t, out)
	gen := ints(t, r["generated_ids"])
	if len(gen) == 0 || len(gen) > 3 || strconv.Itoa(gen[len(gen)-1]) != stop || r["stop_reason"] != "stop_id" {
		t.Errorf("stop id %s: generated %v, stop_reason %v", stop, gen, r["stop_reason"])
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRunFailures: an id outside the vocabulary is a validation error (2); a directory that is not
// a model is a runtime failure (1).
func TestRunFailures(t *testing.T) {
	dir := synthTiny(t)
	if code, _, stderr := runCLI(t, dir, "--ids", "1,256", "--out", filepath.Join(t.TempDir(), "r.json")); code != exitUsage || !strings.Contains(stderr, "--ids") {
		t.Errorf("id 256 with vocab 256: exit %d, %s", code, stderr)
	}
	if code, _, _ := runCLI(t, t.TempDir(), "--ids", "1"); code != exitRuntime {
		t.Errorf("empty directory: exit %d, want 1", code)
	}
}

// TestSignal: a SIGTERM stops generation, still writes the report and exits 143.
func TestSignal(t *testing.T) {
	dir := synthTiny(t)
	out := filepath.Join(t.TempDir(), "r.json")
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	a, err := parseArgs([]string{dir, "--ids", "1,2", "--gen", "50", "--no-stop", "--out", out}, runCmd.flags)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseRun(a)
	if err != nil {
		t.Fatal(err)
	}
	var so, se bytes.Buffer
	code := decode(o, &so, &se, sigs)
	if code != 143 {
		t.Fatalf("exit %d, want 143: %s", code, se.String())
	}
	r := readReport(t, out)
	if r["stop_reason"] != "signal" || len(ints(t, r["generated_ids"])) >= 50 {
		t.Errorf("report after SIGTERM: %v", r)
	}
}

// TestDemo is the README's setup-free command.
func TestDemo(t *testing.T) {
	code, stdout, stderr := runCLI(t, "demo", "--gen", "4", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("demo output is not a JSON report: %v\n%s", err, stdout)
	}
	if len(ints(t, r["generated_ids"])) != 4 {
		t.Errorf("demo generated %v", r["generated_ids"])
	}
}

// TestSynthCommand writes a geometry through the CLI and decodes from it.
func TestSynthCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if code, _, stderr := runCLI(t, "synth", "tiny", dir, "--seed", "9"); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "synth", "tiny", dir); code != exitUsage || strings.Count(stderr, "synth") != 2 {
		t.Errorf("synth into a non-empty directory: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, dir, "--ids", "1", "--gen", "2", "--out", "-"); code != exitOK {
		t.Errorf("decode: exit %d: %s", code, stderr)
	}
	code, out, stderr := runCLI(t, "info", dir)
	var info struct {
		Vocab                    int   `json:"vocab"`
		Params                   int64 `json:"params"`
		MLACacheBytesPerPosition int64 `json:"mla_cache_bytes_per_position"`
	}
	if err := json.Unmarshal([]byte(out), &info); code != exitOK || err != nil || info.Vocab != 256 || info.Params == 0 ||
		info.MLACacheBytesPerPosition != 4*(32+8)*4 {
		t.Errorf("info: exit %d, %v, %+v, %s", code, err, info, stderr)
	}
}

// TestFixtureModels: the CLI reproduces every model fixture's greedy continuation.
func TestFixtureModels(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		ref := testkit.LoadReference(t, dir)
		out := filepath.Join(t.TempDir(), "r.json")
		ids := strings.Trim(jsonText(ref.PromptIDs), "[]")
		n := strconv.Itoa(len(ref.FullIDs) - len(ref.PromptIDs))
		if code, _, stderr := runCLI(t, dir, "--ids", ids, "--gen", n, "--incremental", "--no-stop", "--out", out); code != exitOK {
			t.Fatalf("%s: exit %d: %s", dir, code, stderr)
		}
		if got := jsonText(ints(t, readReport(t, out)["full_ids"])); got != jsonText(ref.FullIDs) {
			t.Errorf("%s: full_ids %s, want %s", filepath.Base(dir), got, jsonText(ref.FullIDs))
		}
		// Teacher forcing over the oracle's own greedy continuation: every generated position
		// agrees (the prompt positions need not).
		all := strings.Trim(jsonText(ref.FullIDs), "[]")
		if code, _, stderr := runCLI(t, dir, "--ids", all, "--tf-check", "--out", out); code != exitOK {
			t.Fatalf("%s: --tf-check: exit %d: %s", dir, code, stderr)
		}
		r := readReport(t, out)
		gen := len(ref.FullIDs) - len(ref.PromptIDs)
		if m := int(r["tf_matches"].(float64)); m < gen || int(r["tf_positions"].(float64)) != len(ref.FullIDs)-1 {
			t.Errorf("%s: --tf-check %v, want at least %d matches", filepath.Base(dir), r, gen)
		}
	}
}
