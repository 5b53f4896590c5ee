package main

// Exec tests of issue 25's front door: text on stdout, llama.cpp's flag names, suggestions for
// typos, prompts from every source, and the interactive mode, all through the built binary.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/tokenizer"
)

// loadFixtureRef is dir's reference for the tests that generate five tokens or more past the
// prompt: a shorter continuation would leave them nothing to compare.
func loadFixtureRef(t *testing.T, dir string) *testkit.Reference {
	t.Helper()
	r := testkit.LoadReference(t, dir)
	require.Greater(t, len(r.FullIDs), len(r.PromptIDs)+4, "%s: reference continuation too short", dir)
	return r
}

// idCSV is the --ids form of ids.
func idCSV(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}

// parseCSV reads one line of comma-separated ids as run prints them.
func parseCSV(t *testing.T, line string) []int {
	t.Helper()
	if line == "" {
		return nil
	}
	var ids []int
	for f := range strings.SplitSeq(line, ",") {
		id, err := strconv.Atoi(f)
		require.NoError(t, err, "%q", line)
		ids = append(ids, id)
	}
	return ids
}

// reportIDs reads generated_ids from a run report.
func reportIDs(t *testing.T, path string) (generated []int, rep map[string]any) {
	t.Helper()
	r := testkit.ReadJSON[struct {
		Generated []int `json:"generated_ids"`
	}](t, path)
	return r.Generated, testkit.ReadJSON[map[string]any](t, path)
}

// TestExecTextOnStdout: stdout is exactly the generated text (the bytes of the generated ids),
// diagnostics are on stderr, and no report is written without --out.
func TestExecTextOnStdout(t *testing.T) {
	dir := synthDir(t) // holds its tokenizer: no --tok needed
	cwd := t.TempDir()
	plain := execK3(t, cwd, "", "run", dir, "--prompt", "hi", "-n", "8")
	require.Equal(t, 0, plain.code, plain.stderr)
	assert.NotEmpty(t, plain.stdout)
	assert.Contains(t, plain.stderr, "k3: summary:")
	assert.NoFileExists(t, filepath.Join(cwd, "k3_run.json"))
	entries, err := os.ReadDir(cwd)
	require.NoError(t, err)
	assert.Empty(t, entries, "a run without --out wrote files")

	withOut := execK3(t, cwd, "", "run", dir, "--prompt", "hi", "-n", "8", "--out", "r.json", "-q")
	require.Equal(t, 0, withOut.code, withOut.stderr)
	assert.Empty(t, withOut.stderr, "-q leaves stderr empty")
	gen, rep := reportIDs(t, filepath.Join(cwd, "r.json"))
	require.Len(t, gen, 8)
	enc, err := tokenizer.LoadDir(dir)
	require.NoError(t, err)
	want, err := enc.DecodeBytes(gen)
	require.NoError(t, err)
	assert.Equal(t, string(want), withOut.stdout, "stdout is the generated ids' bytes")
	assert.Equal(t, plain.stdout, withOut.stdout)
	assert.Equal(t, float64(8), float64(len(rep["generated_ids"].([]any))))

	// --out - puts the report on stdout instead of the text.
	js := execK3(t, cwd, "", "run", dir, "-p", "hi", "-n", "8", "--out", "-", "-q")
	require.Equal(t, 0, js.code, js.stderr)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(js.stdout), &r), "stdout: %q", js.stdout)
}

// TestExecIDsOnStdout: without a tokenizer stdout is the generated ids, and on every fixture
// model they are the reference's greedy continuation.
func TestExecIDsOnStdout(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		ref := loadFixtureRef(t, dir)
		want := ref.FullIDs[len(ref.PromptIDs):]
		r := execK3(t, "", "", "run", dir, "--ids", idCSV(ref.PromptIDs), "-n", strconv.Itoa(len(want)), "--no-stop")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, idCSV(want)+"\n", r.stdout, filepath.Base(dir))
	}
}

// TestExecLlamaFlagNames: llama.cpp's spellings do what the long names do, and --help lists
// both.
func TestExecLlamaFlagNames(t *testing.T) {
	dir := synthDir(t)
	cwd := t.TempDir()
	short := execK3(t, cwd, "", "run", dir, "-p", "hi", "-n", "4", "-t", "2", "--temp", "0.7", "-s", "3", "--top-k", "40",
		"--top-p", "0.9", "--min-p", "0.05", "--repeat-penalty", "1.1", "-c", "64", "--out", "s.json")
	require.Equal(t, 0, short.code, short.stderr)
	long := execK3(t, cwd, "", "run", dir, "--prompt", "hi", "--gen", "4", "--threads", "2", "--temperature", "0.7",
		"--seed", "3", "--top-k", "40", "--top-p", "0.9", "--min-p", "0.05", "--repeat-penalty", "1.1", "--ctx-size", "64",
		"--out", "l.json")
	require.Equal(t, 0, long.code, long.stderr)
	assert.Equal(t, long.stdout, short.stdout)
	gs, rs := reportIDs(t, filepath.Join(cwd, "s.json"))
	gl, _ := reportIDs(t, filepath.Join(cwd, "l.json"))
	assert.Len(t, gs, 4)
	assert.Equal(t, gl, gs)
	assert.Equal(t, float64(2), rs["threads"])
	sampler := rs["generation"].(map[string]any)["sampler"].(map[string]any)
	assert.Equal(t, 0.7, sampler["Temperature"], "%v", sampler)
	// A different seed gives a different stream (so -s is not ignored).
	other := execK3(t, cwd, "", "run", dir, "-p", "hi", "-n", "16", "--temp", "5", "-s", "4", "-q", "--no-stop")
	same := execK3(t, cwd, "", "run", dir, "-p", "hi", "-n", "16", "--temp", "5", "-s", "3", "-q", "--no-stop")
	assert.NotEqual(t, same.stdout, other.stdout)

	// -f/--file and standard input.
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "p.txt"), []byte("hi"), 0o644))
	for _, args := range [][]string{{"-f", "p.txt"}, {"--file", "p.txt"}, {"--prompt-file", "-"}} {
		r := execK3(t, cwd, "hi", append([]string{"run", dir, "-n", "4", "-t", "2", "--temp", "0.7", "-s", "3", "--top-k", "40",
			"--top-p", "0.9", "--min-p", "0.05", "--repeat-penalty", "1.1", "-q"}, args...)...)
		require.Equal(t, 0, r.code, "%q: %s", args, r.stderr)
		assert.Equal(t, short.stdout, r.stdout, "%q", args)
	}

	// -r/--reverse-prompt is a stop string: the text ends before it.
	full := execK3(t, cwd, "", "run", dir, "-p", "hi", "-n", "12", "--no-stop", "-q")
	require.Equal(t, 0, full.code, full.stderr)
	require.GreaterOrEqual(t, len(full.stdout), 6)
	stop := full.stdout[3:5]
	r := execK3(t, cwd, "", "run", dir, "-p", "hi", "-n", "12", "--no-stop", "-q", "-r", stop)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, full.stdout[:strings.Index(full.stdout, stop)], r.stdout)

	help := execK3(t, "", "", "run", "--help")
	for _, s := range []string{"-p, --prompt", "-f, --prompt-file", "--file", "-n, --n-predict", "--gen", "--temp X, --temperature",
		"-t, --threads", "-s, --seed", "-c, --ctx-size", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
		"-r, --reverse-prompt", "--stop", "-i, --interactive", "-q, --quiet"} {
		assert.Contains(t, help.stdout, s)
	}
}

// TestExecDidYouMean: a typo of a command or a flag gets one line naming the nearest name and
// exit 2; a word that is neither gets no guess.
func TestExecDidYouMean(t *testing.T) {
	dir := synthDir(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rn", dir}, `k3: unknown command "rn" (did you mean run?)`},
		{[]string{"rn"}, `k3: unknown command "rn" (did you mean run?)`},
		{[]string{"chta", dir}, `(did you mean chat?)`},
		{[]string{"doctr"}, `(did you mean doctor?)`},
		{[]string{"sim-cach", "x"}, `(did you mean sim-cache?)`},
		{[]string{"run", dir, "-p", "hi", "--tmp", "0.7"}, "k3 run: --tmp: unknown flag (did you mean --temp?)"},
		{[]string{"run", dir, "-p", "hi", "--n-predcit", "2"}, "(did you mean --n-predict?)"},
		{[]string{"run", dir, "-p", "hi", "-gen", "2"}, "(did you mean --gen?)"},
		{[]string{"demo", "--jsn"}, "k3 demo: --jsn: unknown flag (did you mean --json?)"},
	} {
		r := execK3(t, "", "", c.args...)
		assert.Equal(t, 2, r.code, "%q", c.args)
		assert.Contains(t, r.stderr, c.want, "%q", c.args)
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "%q: one line: %q", c.args, r.stderr)
		assert.Empty(t, r.stdout)
	}
}

// TestExecPromptLimits: each prompt source is bounded, and a text prompt without any
// tokenizer names the flag that gives one.
func TestExecPromptLimits(t *testing.T) {
	dir := synthDir(t)
	cwd := t.TempDir()
	big := strings.Repeat("a", maxPromptBytes+1)
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "big.txt"), []byte(big), 0o644))
	r := execK3(t, cwd, "", "run", dir, "-f", "big.txt")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, fmt.Sprintf("longer than %d bytes", maxPromptBytes))
	r = execK3(t, cwd, big, "run", dir, "-f", "-")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, fmt.Sprintf("longer than %d bytes", maxPromptBytes))
	r = execK3(t, cwd, "", "run", dir, "-p", "hi", "-c", "2")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--ctx-size: the prompt's 2 ids leave no room in a context of 2")
	noTok := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(noTok, "config.json"), cfg, 0o644))
	r = execK3(t, cwd, "", "run", noTok, "-p", "hi")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--prompt: a text prompt needs --tok DIR")
}

// TestExecDemoText: demo prints text by default and the report with --json.
func TestExecDemoText(t *testing.T) {
	r := execK3(t, "", "", "demo", "-n", "3", "-q")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotEmpty(t, r.stdout)
	assert.False(t, json.Valid([]byte(r.stdout)), "demo printed JSON: %q", r.stdout)
	j := execK3(t, "", "", "demo", "-n", "3", "--json", "-q")
	require.Equal(t, 0, j.code, j.stderr)
	var rep struct {
		Generated []int   `json:"generated_ids"`
		Text      *string `json:"generated_text"`
	}
	require.NoError(t, json.Unmarshal([]byte(j.stdout), &rep))
	assert.Len(t, rep.Generated, 3)
	assert.NotNil(t, rep.Text)
}

// TestExecCodedExpertsRun: a checkpoint written by compress-experts runs with no extra flag
// (the expert cache its coded experts need is chosen by default, and the plan says so), and
// its text equals the original's (the coding is lossless).
func TestExecCodedExpertsRun(t *testing.T) {
	dir := synthDir(t)
	coded := filepath.Join(t.TempDir(), "coded")
	r := execK3(t, "", "", "compress-experts", dir, coded)
	require.Equal(t, 0, r.code, r.stderr)
	orig := execK3(t, "", "", "run", dir, "-p", "hi", "-n", "6", "--no-stop")
	require.Equal(t, 0, orig.code, orig.stderr)
	got := execK3(t, "", "", "run", coded, "-p", "hi", "-n", "6", "--no-stop")
	require.Equal(t, 0, got.code, got.stderr)
	assert.Equal(t, orig.stdout, got.stdout)
	assert.Contains(t, got.stderr, "are entropy-coded: expert cache")
	plan := execK3(t, "", "", "plan", coded)
	require.Equal(t, 0, plan.code, plan.stderr)
	assert.Contains(t, plan.stdout, "by default")
	assert.Contains(t, plan.stdout, "expert cache")
	// A flag that chooses the cache wins, and no default is announced.
	flag := execK3(t, "", "", "run", coded, "-p", "hi", "-n", "6", "--no-stop", "--cache-gb", "0")
	require.Equal(t, 0, flag.code, flag.stderr)
	assert.Equal(t, orig.stdout, flag.stdout)
	assert.NotContains(t, flag.stderr, "by default")
}

// TestExecLadderDefaults: without --ids the ladder's prompt fits the model's vocabulary, so
// every rung runs, and each rung's output shows while it runs, prefixed with the rung.
func TestExecLadderDefaults(t *testing.T) {
	dir := testkit.Models(t)[0]
	r := execK3(t, "", "", "ladder", dir, "--budgets", "floor,all", "-n", "2")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "ladder: prompt ids 1,2,3,4,5 (the default for a vocabulary of 256")
	assert.Contains(t, r.stdout, "VERDICT: all 2 rungs emitted identical ids")
	for _, rung := range []string{"  rung 1/2: ", "  rung 2/2: "} {
		assert.Contains(t, r.stderr, rung+"step    1 token", "the rung's tokens are shown as they come")
		assert.Contains(t, r.stderr, rung+"k3: summary:")
	}
	assert.Equal(t, "1008,10484,318,15383,387", defaultLadderIDs(163840))
	assert.Equal(t, "1,2,3,4,5", defaultLadderIDs(10484))
}
