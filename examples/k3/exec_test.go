package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/preset"
)

// These tests build the k3 binary and run it as a user would: exit codes, stdout and stderr are
// the process's own.

// k3Binary is the binary buildCLI builds once per test process.
func k3Binary(t *testing.T) string { return buildCLI(t) }

type result struct {
	code           int
	stdout, stderr string
}

// execK3 runs the binary in dir (a fresh temporary directory when empty) with stdin.
func execK3(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(k3Binary(t), args...)
	if dir == "" {
		dir = t.TempDir()
	}
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r := result{code, o.String(), e.String()}
	for _, dup := range []string{"k3: k3:", "synth: synth:", "k3: k3 "} {
		assert.NotContains(t, r.stderr, dup, "repeated prefix in %q", args)
	}
	return r
}

// synthDir writes the tiny geometry through the binary.
func synthDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	r := execK3(t, "", "", "synth", "tiny", dir, "--seed", "4")
	require.Equal(t, 0, r.code, r.stderr)
	return dir
}

// subcommands with arguments that are valid up to the point where --help is inserted.
var helpCases = map[string][]string{
	"run":        {"run", "MODEL", "--ids", "1,2", "--gen", "3"},
	"synth":      {"synth", "tiny", "DIR", "--seed", "2"},
	"demo":       {"demo", "--gen", "2"},
	"info":       {"info", "MODEL"},
	"tokenize":   {"tokenize", "--tok", "DIR", "--decode"},
	"verify":     {"verify", "MODEL", "--manifest", "FILE"},
	"pack-trunk": {"pack-trunk", "MODEL", "OUT"},
	"ladder":     {"ladder", "MODEL", "--budgets", "1,floor"},
	"plan":       {"plan", "MODEL", "--preset", "laptop", "--json"},
	"doctor":     {"doctor", "--probe-mb", "64"},
	"sim-cache":  {"sim-cache", "TRACE", "--plot", "x.svg"},
}

// TestExecHelpEverywhere: -h and --help at every position of every subcommand's command line
// print that subcommand's help on stdout and exit 0, even after a bad flag; nothing is loaded.
func TestExecHelpEverywhere(t *testing.T) {
	for name, argv := range helpCases {
		for _, h := range []string{"--help", "-h"} {
			for pos := 1; pos <= len(argv); pos++ {
				args := append(append(append([]string{}, argv[:pos]...), h), argv[pos:]...)
				r := execK3(t, "", "", args...)
				assert.Equal(t, 0, r.code, "%q: %s", args, r.stderr)
				assert.True(t, strings.HasPrefix(r.stdout, "usage: k3 "+name), "%q: stdout %q", args, r.stdout)
				assert.Empty(t, r.stderr, "%q", args)
			}
			args := append(append([]string{}, argv...), "--bogus", h)
			r := execK3(t, "", "", args...)
			assert.Equal(t, 0, r.code, "%q: help wins over a bad flag", args)
		}
		r := execK3(t, "", "", "help", name)
		assert.Equal(t, 0, r.code)
		assert.True(t, strings.HasPrefix(r.stdout, "usage: k3 "+name), "k3 help %s", name)
	}
	// The bare form: k3 <model_dir> --help is run's help.
	for _, args := range [][]string{{"MODEL", "--help"}, {"MODEL", "--ids", "1", "-h"}} {
		r := execK3(t, "", "", args...)
		assert.Equal(t, 0, r.code)
		assert.True(t, strings.HasPrefix(r.stdout, "usage: k3 run"), "%q", args)
	}
}

// TestExecWithoutModel: the informational flags work in an empty directory.
func TestExecWithoutModel(t *testing.T) {
	for args, want := range map[string]string{
		"--help": "usage:", "-h": "usage:", "help": "usage:", "--version": Version,
		"--list-presets": "workstation", "--list-geometries": "tiny",
	} {
		r := execK3(t, "", "", args)
		assert.Equal(t, 0, r.code, "%s: %s", args, r.stderr)
		assert.Contains(t, r.stdout, want, args)
	}
	r := execK3(t, "", "", "--list-presets")
	for _, p := range preset.All() {
		assert.Contains(t, r.stdout, "\n"+p.Name+" ", "preset %s listed", p.Name)
	}
}

// TestExecUsageErrors: every command-line mistake exits 2 with a message on stderr naming the
// subcommand or the flag, and no report is written. Output paths and ids are checked before any
// weights load: the run cases point at a directory without shards (loading would exit 1).
func TestExecUsageErrors(t *testing.T) {
	tiny := synthDir(t)
	noShards := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(tiny, "config.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(noShards, "config.json"), cfg, 0o644))
	badCfg := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(badCfg, "config.json"),
		bytes.Replace(cfg, []byte(`"num_hidden_layers": 13`), []byte(`"num_hidden_layers": 12`), 1), 0o644))
	nonEmpty := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644))
	missingDir := filepath.Join(t.TempDir(), "no", "such")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{noShards, "--ids", "1", "--bogus"}, "k3 run: --bogus: unknown flag"},
		{[]string{"run", noShards, "--ids", "1", "-x"}, "k3 run: -x: unknown flag"},
		{[]string{"run", noShards, "--ids", "1", "-gen", "2"}, "-gen: unknown flag (did you mean --gen?)"},
		{[]string{"synth", "tiny", "d", "--bogus"}, "k3 synth: --bogus: unknown flag"},
		{[]string{"demo", "--bogus"}, "k3 demo: --bogus: unknown flag"},
		{[]string{"info", noShards, "--bogus"}, "k3 info: --bogus: unknown flag"},
		{[]string{"tokenize", "--bogus"}, "k3 tokenize: --bogus: unknown flag"},
		{[]string{"verify", noShards, "--bogus"}, "k3 verify: --bogus: unknown flag"},
		{[]string{noShards, "--ids", "1, 2"}, "--ids: element 1:"},
		{[]string{noShards, "--ids", " 1"}, "--ids: element 0:"},
		{[]string{noShards, "--ids", "1", "--gen", "-1"}, "--gen: -1 is outside [0, 4096]"},
		{[]string{noShards, "--ids", "1", "--gen", "4097"}, "--gen: 4097 is outside [0, 4096]"},
		{[]string{noShards, "--ids", "1", "--threads", "0"}, "--threads: 0 is outside"},
		{[]string{noShards, "--ids", "1", "--out", filepath.Join(missingDir, "r.json")}, "--out:"},
		{[]string{noShards, "--ids", "1", "--out", t.TempDir()}, "--out:"},
		{[]string{noShards, "--ids", "1", "--dump-logits", filepath.Join(missingDir, "l.f32")}, "--dump-logits:"},
		{[]string{noShards, "--ids", "1", "--stop-ids", "256"}, "--stop-ids: element 0: id 256 is outside the vocabulary [0, 256)"},
		{[]string{noShards, "--ids", "1,256"}, "--ids: element 1: id 256 is outside the vocabulary [0, 256)"},
		{[]string{noShards, "--ids", "1", "--stop-ids", "1", "--no-stop"}, "--stop-ids: conflicts with --no-stop"},
		{[]string{noShards, "--prompt", "hi"}, "--prompt: a text prompt needs --tok"},
		{[]string{noShards}, "a prompt is required"},
		{[]string{"run"}, "expected exactly one model directory"},
		{[]string{badCfg, "--ids", "1"}, "invalid configuration"},
		{[]string{"synth", "tiny"}, "k3 synth: expected <geometry> <dir>"},
		{[]string{"synth", "huge", "d"}, "unknown geometry"},
		{[]string{"synth", "tiny", "d", "--seed", "-3"}, "--seed: -3 is outside"},
		{[]string{"synth", "tiny", nonEmpty}, "not empty"},
		{[]string{"demo", "--gen", "65"}, "--gen: 65 is outside [0, 64]"},
		{[]string{"demo", "--keep", nonEmpty}, "not empty"},
		{[]string{"info"}, "k3 info: expected exactly one model directory"},
		{[]string{"tokenize"}, "give exactly one of --tok DIR and --encoding NAME"},
		{[]string{"tokenize", "--encoding", "p50k_base"}, "unknown encoding"},
		{[]string{"verify"}, "k3 verify: expected exactly one model directory"},
		{[]string{"verify", tiny, "--manifest", filepath.Join(missingDir, "m")}, "--manifest:"},
		{[]string{"pack-trunk", tiny}, "k3 pack-trunk: expected <model_dir> <out_dir>"},
		{[]string{"pack-trunk", tiny, "o", "--bogus"}, "k3 pack-trunk: --bogus: unknown flag"},
		{[]string{noShards, "--ids", "1", "--trunk-gb", "-1"}, "--trunk-gb:"},
		{[]string{noShards, "--ids", "1", "--trunk-ring", "9"}, "--trunk-ring: 9 is outside [1, 8]"},
		{[]string{"ladder", tiny, "--bogus"}, "k3 ladder: --bogus: unknown flag"},
		{[]string{"ladder", tiny}, "k3 ladder: --budgets:"},
		{[]string{"--bogus"}, "--bogus: unknown flag"},
	}
	for _, c := range cases {
		cwd := t.TempDir()
		r := execK3(t, cwd, "", c.args...)
		assert.Equal(t, 2, r.code, "%q: stderr %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%q", c.args)
		assert.NoFileExists(t, filepath.Join(cwd, "k3_run.json"), "%q wrote a report", c.args)
	}
	// Without the refusals above, the same directory fails at loading the weights: exit 1.
	r := execK3(t, "", "", noShards, "--ids", "1")
	assert.Equal(t, 1, r.code, r.stderr)
}

// TestExecBindFailure: a missing shard is a runtime failure (exit 1) reported in one line.
func TestExecBindFailure(t *testing.T) {
	dir := synthDir(t)
	require.NoError(t, os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors")))
	r := execK3(t, "", "", dir, "--ids", "1")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, 1, strings.Count(r.stderr, "missing:"), r.stderr)
	assert.Contains(t, r.stderr, "shard model-00002-of-00003.safetensors (shard absent)")
}

// TestExecFixtureRuns: run on every fixture model reproduces the reference full_ids with the
// default (incremental) decoding.
func TestExecFixtureRuns(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		ref := testkit.LoadReference(t, dir)
		cwd := t.TempDir()
		r := execK3(t, cwd, "", "run", dir, "--ids", strings.Trim(jsonText(ref.PromptIDs), "[]"),
			"--gen", strconv.Itoa(len(ref.FullIDs)-len(ref.PromptIDs)), "--no-stop", "--out", "r.json", "--dump-logits", "l.f32")
		require.Equal(t, 0, r.code, "%s: %s", dir, r.stderr)
		rep := readReport(t, filepath.Join(cwd, "r.json"))
		assert.Equal(t, ref.FullIDs, ints(t, rep["full_ids"]), filepath.Base(dir))
		assert.Equal(t, true, rep["incremental"], "incremental is the default")
		checkDumpedLogits(t, dir, filepath.Join(cwd, "l.f32"), len(ref.PromptIDs))
	}
}

// checkDumpedLogits compares --dump-logits (the step-0 logits, i.e. those of the last prompt
// position) with the float64 truth of reference_f64.json under §5.7's max rule: no logit
// farther from the truth than half the float32 reference's largest error. (§5.7's RMS bound is
// over all [T][V] logits, which one row does not determine; the row's RMS is logged.)
func checkDumpedLogits(t *testing.T, dir, dump string, promptLen int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference_f64.json"))
	require.NoError(t, err)
	var truth struct {
		V      int         `json:"V"`
		MaxErr float64     `json:"ref32_max_abs_err"`
		RMSErr float64     `json:"ref32_rms_err"`
		Logits [][]float64 `json:"logits_f64"`
	}
	require.NoError(t, json.Unmarshal(b, &truth))
	raw, err := os.ReadFile(dump)
	require.NoError(t, err)
	require.Len(t, raw, 4*truth.V)
	row := truth.Logits[promptLen-1]
	var maxErr, sq float64
	for i := range truth.V {
		d := math.Abs(float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))) - row[i])
		maxErr = max(maxErr, d)
		sq += d * d
	}
	rms := math.Sqrt(sq / float64(truth.V))
	assert.LessOrEqual(t, maxErr, 0.5*truth.MaxErr, "%s: max |logit - truth|", filepath.Base(dir))
	t.Logf("%s: --dump-logits max |Δ| %.3g (%.2f of the f32 reference's), RMS %.3g", filepath.Base(dir), maxErr, maxErr/truth.MaxErr, rms)
}

// TestExecTextEndToEnd: synth writes a tokenizer that run, tokenize and demo use.
func TestExecTextEndToEnd(t *testing.T) {
	dir := synthDir(t)
	cwd := t.TempDir()
	r := execK3(t, cwd, "", "run", dir, "--tok", dir, "--prompt", "Hello, world", "--gen", "3", "--out", "r.json")
	require.Equal(t, 0, r.code, r.stderr)
	rep := readReport(t, filepath.Join(cwd, "r.json"))
	assert.NotNil(t, rep["generated_text"])
	tok := execK3(t, "", "Hello, world", "tokenize", "--tok", dir)
	require.Equal(t, 0, tok.code, tok.stderr)
	assert.Equal(t, strings.Trim(jsonText(ints(t, rep["prompt_ids"])), "[]")+"\n", tok.stdout)
	dec := execK3(t, "", tok.stdout, "tokenize", "--tok", dir, "--decode")
	require.Equal(t, 0, dec.code, dec.stderr)
	assert.Equal(t, "Hello, world", dec.stdout)
	demo := execK3(t, "", "", "demo", "--prompt", "Hi there", "--gen", "2", "--json")
	require.Equal(t, 0, demo.code, demo.stderr)
	var drep map[string]any
	require.NoError(t, json.Unmarshal([]byte(demo.stdout), &drep))
	assert.NotNil(t, drep["generated_text"])
	assert.Len(t, ints(t, drep["generated_ids"]), 2)
	// A built-in encoding: tiktoken's o200k_base ids.
	o := execK3(t, "", "hello world", "tokenize", "--encoding", "o200k_base")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, "24912,2375\n", o.stdout)
}

// TestExecVerify: verify passes on a fresh checkpoint, writes a manifest that sha256sum-style
// checking accepts, catches a changed byte (with the manifest) and a truncated shard (without).
func TestExecVerify(t *testing.T) {
	dir := synthDir(t)
	manifest := filepath.Join(t.TempDir(), "manifest.sha256")
	r := execK3(t, "", "", "verify", dir, "--write-manifest", manifest)
	require.Equal(t, 0, r.code, r.stderr)
	b, err := os.ReadFile(manifest)
	require.NoError(t, err)
	assert.Equal(t, 7, strings.Count(string(b), "\n"), "config, index, 2 tokenizer files, 3 shards:\n%s", b)
	assert.Regexp(t, `(?m)^[0-9a-f]{64}  model-00002-of-00003\.safetensors$`, string(b))
	r = execK3(t, "", "", "verify", dir, "--manifest", manifest)
	require.Equal(t, 0, r.code, r.stderr)

	const shard = "model-00002-of-00003.safetensors"
	path := filepath.Join(dir, shard)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := bytes.Clone(data)
	changed[len(changed)-100] ^= 1
	require.NoError(t, os.WriteFile(path, changed, 0o644))
	r = execK3(t, "", "", "verify", dir)
	assert.Equal(t, 0, r.code, "a changed data byte keeps the sizes: %s", r.stderr)
	r = execK3(t, "", "", "verify", dir, "--manifest", manifest)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "k3 verify: "+shard+": changed: sha256 ")
	assert.Equal(t, 1, strings.Count(r.stderr, "safetensors: "), "one problem line: %s", r.stderr)
	assert.Contains(t, r.stderr, ": 1 problem(s)")

	require.NoError(t, os.WriteFile(path, data[:len(data)-10], 0o644))
	r = execK3(t, "", "", "verify", dir)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "k3 verify: "+shard+": truncated: "+strconv.Itoa(len(data)-10)+" bytes, its header describes "+strconv.Itoa(len(data)))
	require.NoError(t, os.Remove(path))
	r = execK3(t, "", "", "verify", dir)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "k3 verify: "+shard+": missing")
}

// TestExecSynthInterrupted: SIGINT during synth (the sparse k3 geometry takes seconds) exits 130
// and leaves neither the target nor the staging directory, so nothing blocks a rerun.
func TestExecSynthInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "k3")
	cmd := exec.Command(k3Binary(t), "synth", "k3", dir)
	var e bytes.Buffer
	cmd.Stderr = &e
	require.NoError(t, cmd.Start())
	staging := filepath.Join(parent, ".k3.k3-synth-partial")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if ents, err := os.ReadDir(staging); err == nil && len(ents) > 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("synth k3 never started writing shards")
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Skipf("synth finished before the signal (%v); nothing to check", err)
	}
	assert.Equal(t, 130, ee.ExitCode(), e.String())
	assert.Contains(t, e.String(), "interrupted; removed the partial output")
	assert.NoDirExists(t, staging)
	assert.NoDirExists(t, dir)
}
