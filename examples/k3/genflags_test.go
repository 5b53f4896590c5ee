package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/k3-project/k3/tokenizer"
)

// TestGenFlagUsage: malformed sampling, stop, state and speculation flags exit 2 naming the flag.
func TestGenFlagUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--temperature", "-1"}, "--temperature"},
		{[]string{"--temperature", "NaN"}, "--temperature"},
		{[]string{"--temperature", "0x1p3"}, "--temperature"},
		{[]string{"--top-p", "1.5"}, "--top-p"},
		{[]string{"--min-p", "1"}, "--min-p"},
		{[]string{"--repeat-penalty", "0.5"}, "--repeat-penalty"},
		{[]string{"--top-k", "-3"}, "--top-k"},
		{[]string{"--seed", "-1"}, "--seed"},
		{[]string{"--seed", "18446744073709551616"}, "--seed"},
		{[]string{"--spec", "3", "--full-recompute"}, "--spec"}, // without --incremental
		{[]string{"--spec", "33", "--incremental"}, "--spec"},
		{[]string{"--load-state", "x.k3st", "--full-recompute"}, "--load-state"},
		{[]string{"--save-state", ""}, "--save-state"},
		{[]string{"--stop", "abc"}, "--stop"}, // without --tok
	} {
		args := append([]string{"m", "--ids", "1,2"}, c.args...)
		code, _, stderr := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(stderr, c.flag) {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
	a, err := parseArgs([]string{"m", "--stop", "a", "--gen=3", "--stop=b", "--incremental", "--stop", "x", "--", "--stop", "z"}, runCmd.flags)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.all["--stop"]; !slices.Equal(got, []string{"a", "b", "x"}) {
		t.Errorf("repeated --stop: %v", got)
	}
}

func runIDs(t *testing.T, args ...string) (map[string]any, []int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runCLI(t, append(args, "--out", out)...)
	if code != exitOK {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	r := readReport(t, out)
	return r, ints(t, r["generated_ids"])
}

// TestSamplingFlags: a seed fixes the tokens across thread counts and modes; another seed
// changes them.
func TestSamplingFlags(t *testing.T) {
	dir := synthTiny(t)
	base := []string{dir, "--ids", "5,6,7", "--gen", "12", "--no-stop", "--temperature", "1.5", "--top-k", "50"}
	_, a := runIDs(t, append(base, "--seed", "3", "--incremental", "--threads", "1")...)
	_, b := runIDs(t, append(base, "--seed", "3", "--threads", "2")...)
	_, c := runIDs(t, append(base, "--seed", "4", "--incremental")...)
	_, g := runIDs(t, dir, "--ids", "5,6,7", "--gen", "12", "--no-stop")
	if !slices.Equal(a, b) || slices.Equal(a, c) || slices.Equal(a, g) {
		t.Errorf("seed 3: %v and %v; seed 4: %v; greedy %v", a, b, c, g)
	}
}

// TestStateFlags: a conversation saved after turn one and loaded for turn two generates what
// one run over the whole history generates; a damaged file is refused naming the problem.
func TestStateFlags(t *testing.T) {
	dir := synthTiny(t)
	state := filepath.Join(t.TempDir(), "conv.k3st")
	_, turn1 := runIDs(t, dir, "--ids", "5,6,7", "--gen", "5", "--no-stop", "--incremental", "--save-state", state)
	r2, turn2 := runIDs(t, dir, "--ids", "9,10", "--gen", "6", "--no-stop", "--incremental", "--load-state", state)
	history := append(append([]int{5, 6, 7}, turn1...), 9, 10)
	_, whole := runIDs(t, dir, "--ids", strings.Trim(jsonText(history), "[]"), "--gen", "6", "--no-stop")
	if !slices.Equal(turn2, whole) {
		t.Errorf("turn two from the state file %v, from the whole history %v", turn2, whole)
	}
	gen := r2["generation"].(map[string]any)
	if gen["loaded_positions"].(float64) != float64(len(history)-2) {
		t.Errorf("generation report %v", gen)
	}
	// Full-recompute mode can save too.
	state2 := filepath.Join(t.TempDir(), "conv2.k3st")
	runIDs(t, dir, "--ids", "5,6,7", "--gen", "5", "--no-stop", "--save-state", state2)
	b1, _ := os.ReadFile(state)
	b2, _ := os.ReadFile(state2)
	if !bytes.Equal(b1, b2) {
		t.Error("full recompute and incremental runs saved different states")
	}

	bad := filepath.Join(t.TempDir(), "bad.k3st")
	b1[len(b1)/2] ^= 0x10
	if err := os.WriteFile(bad, b1, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, dir, "--ids", "9", "--incremental", "--load-state", bad, "--out", filepath.Join(t.TempDir(), "r.json"))
	if code != exitRuntime || !strings.Contains(stderr, "checksum") {
		t.Errorf("corrupted state: exit %d, %s", code, stderr)
	}
}

// TestSpecFlag: --spec gives the plain greedy ids.
func TestSpecFlag(t *testing.T) {
	dir := synthTiny(t)
	ids := "5,6,7,8,5,6,7,8,5,6,7"
	_, plain := runIDs(t, dir, "--ids", ids, "--gen", "16", "--no-stop", "--incremental")
	r, spec := runIDs(t, dir, "--ids", ids, "--gen", "16", "--no-stop", "--incremental", "--spec", "4")
	if !slices.Equal(plain, spec) {
		t.Errorf("--spec 4 %v, plain %v", spec, plain)
	}
	if r["generation"].(map[string]any)["spec"].(float64) != 4 {
		t.Errorf("report %v", r["generation"])
	}
}

// TestStopFlag: stop strings across two and three tokens end the run at the token completing
// them; generated_text ends before the stop string.
func TestStopFlag(t *testing.T) {
	dir := synthTiny(t)
	tk := writeTestTok(t)
	base := []string{dir, "--tok", tk.dir, "--ids", "5,6,7", "--gen", "12", "--no-stop", "--incremental"}
	_, plain := runIDs(t, base...)
	raw := make([]byte, len(plain))
	for i, id := range plain {
		raw[i] = tk.byteAt[id]
	}
	for _, span := range [][2]int{{3, 5}, {6, 9}} {
		stop := string(raw[span[0]:span[1]])
		at := bytes.Index(raw, []byte(stop))
		r, got := runIDs(t, append(base, "--stop", "never-ever", "--stop", stop)...)
		if want := plain[:at+len(stop)]; !slices.Equal(got, want) {
			t.Errorf("stop %q: ids %v, want %v", stop, got, want)
		}
		if want := tokenizer.ReplaceInvalidUTF8(raw[:at]); r["generated_text"] != want {
			t.Errorf("stop %q: text %q, want %q", stop, r["generated_text"], want)
		}
		if r["stop_reason"] != "stop_string" {
			t.Errorf("stop_reason %v", r["stop_reason"])
		}
	}
}
