package main

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/preset"
)

// planJSON runs `k3 plan --json` and decodes the plan.
func planJSON(t *testing.T, args ...string) (k3.Plan, result) {
	t.Helper()
	r := execK3(t, "", "", append(append([]string{"plan"}, args...), "--json")...)
	var p k3.Plan
	if r.code == 0 {
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), r.stdout)
	}
	return p, r
}

// TestExecPlanPresets: `k3 plan` gives every preset's budgets on every fixture model without
// loading weights; later budget flags override the preset, earlier ones do not; a budget below
// the floor exits 2 naming the floor.
func TestExecPlanPresets(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			big, r := planJSON(t, dir, "--trunk-gb", "1000")
			require.Equal(t, 0, r.code, r.stderr)
			require.NotNil(t, big.Trunk)
			floor := big.Trunk.Floor
			for _, p := range preset.All() {
				got, r := planJSON(t, dir, "--preset", p.Name)
				if p.Name == preset.Auto && r.code == exitUsage {
					// This machine may have too little memory for K3's auto rule: a refusal naming it.
					assert.Contains(t, r.stderr, "preset auto")
					continue
				}
				require.Equal(t, 0, r.code, "%s: %s", p.Name, r.stderr)
				require.NotNil(t, got.Trunk, p.Name)
				require.NotNil(t, got.Cache, p.Name)
				switch {
				case p.Name == preset.Floor:
					assert.Equal(t, floor, got.Trunk.Budget, "floor is the model's trunk floor")
					assert.Zero(t, got.Cache.Budget, "floor has no expert cache")
					assert.Equal(t, got.Trunk.Floor, got.Trunk.Budget)
				case p.Name == preset.Auto:
					assert.Positive(t, got.Trunk.Budget)
				default:
					assert.Equal(t, p.Trunk, got.Trunk.Budget, p.Name)
					assert.Equal(t, p.Cache, got.Cache.Budget, p.Name)
				}
			}
			later, r := planJSON(t, dir, "--preset", "laptop", "--cache-gb", "0.001", "--trunk-gb", "0.002")
			require.Equal(t, 0, r.code, r.stderr)
			assert.Equal(t, int64(1e6), later.Cache.Budget, "a later --cache-gb wins")
			assert.Equal(t, int64(2e6), later.Trunk.Budget, "a later --trunk-gb wins")
			earlier, r := planJSON(t, dir, "--cache-gb", "0.001", "--preset", "laptop")
			require.Equal(t, 0, r.code, r.stderr)
			assert.Equal(t, int64(1e9), earlier.Cache.Budget, "the later preset wins")

			text := execK3(t, "", "", "plan", dir, "--preset", "floor")
			require.Equal(t, 0, text.code, text.stderr)
			assert.Contains(t, text.stdout, "preset floor")
			assert.Contains(t, text.stdout, "trunk budget")
			assert.Contains(t, text.stdout, "expert cache")

			low := execK3(t, "", "", "plan", dir, "--trunk-gb", "0.000001")
			assert.Equal(t, exitUsage, low.code, low.stderr)
			assert.Contains(t, low.stderr, fmt.Sprintf("the minimum for this model is %d bytes", floor))
			low = execK3(t, "", "", "plan", dir, "--cache-gb", "0.000001")
			assert.Equal(t, exitUsage, low.code, low.stderr)
			assert.Contains(t, low.stderr, "budget below one token's working set")
		})
	}
	r := execK3(t, "", "", "plan", "nowhere", "--preset", "huge")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, `unknown preset "huge"`)
}

// TestExecRunPresetFloor: --preset floor runs at the trunk floor with no cache and reproduces
// the reference; the JSON has the §11.1 keys, and each step line its hit and bytes read.
func TestExecRunPresetFloor(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := readRef(t, dir)
	cwd := t.TempDir()
	r := execK3(t, cwd, "", "run", dir, "--ids", joinIDs(ref.PromptIDs), "--gen", itoa(len(ref.FullIDs)-len(ref.PromptIDs)),
		"--no-stop", "--preset", "floor", "--out", "r.json")
	require.Equal(t, 0, r.code, r.stderr)
	rep := readReport(t, filepath.Join(cwd, "r.json"))
	for _, k := range []string{"prompt_ids", "generated_ids", "full_ids", "layers", "layers_requested", "layers_completed",
		"expert_drops", "peak_rss_bytes", "wall_seconds", "seconds_per_token", "expert_bytes_read", "trunk_bytes_read",
		"embedding_bytes_read", "lm_head_bytes_read", "ultra_low_memory", "generated_text", "plan", "cache_stats", "trunk_stats"} {
		assert.Contains(t, rep, k)
	}
	assert.Equal(t, ref.FullIDs, ints(t, rep["full_ids"]))
	plan := rep["plan"].(map[string]any)
	tp := plan["trunk"].(map[string]any)
	assert.Equal(t, tp["floor_bytes"], tp["budget_bytes"])
	assert.Equal(t, 0.0, plan["cache"].(map[string]any)["budget_bytes"])
	steps := regexp.MustCompile(`(?m)^step +\d+ token +\d+ +[0-9.]+ s  hit +([0-9.]+)%  read +([0-9.]+) MB`).FindAllStringSubmatch(r.stderr, -1)
	require.Len(t, steps, len(ref.FullIDs)-len(ref.PromptIDs), r.stderr)
	for _, s := range steps {
		mb, err := strconv.ParseFloat(s[2], 64)
		require.NoError(t, err)
		assert.Positive(t, mb, "at the floor every token streams the trunk and reads its experts")
	}
	for _, s := range []string{"true resident hit rate", "I/O share of wall clock", "PEAK RSS"} {
		assert.Contains(t, r.stderr, s)
	}
}

// TestExecCacheTraceSimCache: the trace a run dumps is read back by sim-cache (same request
// count as the run's cache counters) and drawn as a valid SVG.
func TestExecCacheTraceSimCache(t *testing.T) {
	dir := testkit.Models(t)[0]
	cwd := t.TempDir()
	r := execK3(t, cwd, "", "run", dir, "--ids", "1,2,3", "--gen", "6", "--no-stop", "--cache-gb", "0.0001",
		"--dump-cache-trace", "tr", "--out", "r.json")
	require.Equal(t, 0, r.code, r.stderr)
	var rep struct {
		Cache struct {
			ExpertBytes int64 `json:"expert_bytes"`
			Run         struct {
				Requests int64 `json:"requests"`
			} `json:"run"`
		} `json:"cache_stats"`
	}
	b, err := os.ReadFile(filepath.Join(cwd, "r.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Positive(t, rep.Cache.Run.Requests)

	svg := filepath.Join(cwd, "sim.svg")
	eb := rep.Cache.ExpertBytes
	sizes := []string{}
	for _, slots := range []int64{4, 8, 16, 32, 64, 128} {
		sizes = append(sizes, strconv.FormatFloat(float64(slots*eb)/1e9, 'f', -1, 64))
	}
	s := execK3(t, cwd, "", "sim-cache", filepath.Join(cwd, "tr", "expert_trace.bin"), "--expert-bytes", strconv.FormatInt(eb, 10),
		"--sizes-gb", strings.Join(sizes, ","), "--plot", svg)
	require.Equal(t, 0, s.code, s.stderr)
	assert.Contains(t, s.stdout, fmt.Sprintf("requests %d ", rep.Cache.Run.Requests))
	assert.Contains(t, s.stdout, "S3-FIFO%")
	checkSVG(t, svg, "hit rate (%)", "S3-FIFO", "Belady")

	bad := execK3(t, cwd, "", "sim-cache", filepath.Join(cwd, "tr", "expert_trace.bin"), "--plot", filepath.Join(cwd, "no", "x.svg"))
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, "--plot")
	bad = execK3(t, cwd, "", "sim-cache", "x.bin", "--sizes-gb", "2,1")
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, "does not increase")
}

// checkSVG parses the file as XML with an <svg> root and looks for the labels.
func checkSVG(t *testing.T, path string, labels ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	d := xml.NewDecoder(strings.NewReader(string(b)))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "%s is not well-formed XML", path)
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	assert.Equal(t, "svg", root)
	for _, l := range labels {
		assert.Contains(t, string(b), l)
	}
}

// TestExecLadderPlot: ladder on a small synthetic checkpoint draws s/token and peak RSS.
func TestExecLadderPlot(t *testing.T) {
	dir := synthDir(t)
	cwd := t.TempDir()
	r := execK3(t, cwd, "", "ladder", dir, "--budgets", "floor,0.001,all", "--ids", "1,2,3", "--gen", "2", "--plot", "l.svg")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "VERDICT: all 3 rungs emitted identical ids")
	checkSVG(t, filepath.Join(cwd, "l.svg"), "seconds per token", "peak RSS (MB)")
	bad := execK3(t, cwd, "", "ladder", dir, "--budgets", "floor", "--plot", "l.txt")
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, ".svg or .png")
}

// TestExecExpertReadFailure: shards truncated while the run is going (the experts are read per
// token with --cache-gb 0; the trunk is pinned at load) make an expert read fail: exit 4, and
// the report is written with expert_drops > 0.
func TestExecExpertReadFailure(t *testing.T) {
	dir := synthDir(t)
	cwd := t.TempDir()
	cmd := exec.Command(k3Binary(t), "run", dir, "--ids", "1,2,3", "--gen", "4000", "--no-stop", "--trunk-gb", "1",
		"--cache-gb", "0", "--out", "r.json")
	cmd.Dir = cwd
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(pipe)
	truncated := false
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if !truncated && strings.HasPrefix(sc.Text(), "step    1 ") {
			shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
			for _, s := range shards {
				require.NoError(t, os.Truncate(s, 200))
			}
			truncated = true
		}
	}
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v", err)
	require.Equal(t, exitInvalid, ee.ExitCode(), strings.Join(lines, "\n"))
	assert.Contains(t, strings.Join(lines, "\n"), "RUN INVALID")
	rep := readReport(t, filepath.Join(cwd, "r.json"))
	assert.Positive(t, rep["expert_drops"])
	assert.Equal(t, "error", rep["stop_reason"])
	assert.Contains(t, rep["error"], "short read")
	assert.GreaterOrEqual(t, len(ints(t, rep["generated_ids"])), 2)
}

// TestExecUnwritableOutputs: an unwritable --out fails before anything is read (the model
// directory does not even exist).
func TestExecUnwritableOutputs(t *testing.T) {
	r := execK3(t, "", "", "run", "no-such-model", "--ids", "1", "--out", filepath.Join(t.TempDir(), "missing", "r.json"))
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--out")
	assert.NotContains(t, r.stderr, "no-such-model")
}

// TestExecDoctor: doctor measures a temporary file and prints the next command; on a model it
// suggests a preset and estimates the I/O per token.
func TestExecDoctor(t *testing.T) {
	dir := testkit.Models(t)[0]
	tmp := t.TempDir()
	r := execK3(t, "", "", "doctor", dir, "--probe-mb", "64", "--seconds", "1")
	require.Equal(t, 0, r.code, r.stderr)
	for _, s := range []string{"memory ", "O_DIRECT queue depth 1 ", "O_DIRECT queue depth 16 ", "buffered", "suggest  --preset", "estimate", "next     k3 run " + dir} {
		assert.Contains(t, r.stdout, s)
	}
	r = execK3(t, "", "", "doctor", "--dir", tmp, "--probe-mb", "64", "--seconds", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "MB/s")
	left, _ := filepath.Glob(filepath.Join(tmp, ".k3-doctor-*"))
	assert.Empty(t, left, "the probe file is removed")
	r = execK3(t, "", "", "doctor", dir, "--dir", tmp)
	assert.Equal(t, exitUsage, r.code)
}

// TestExecMappedTruncation: a shard truncated under a fully mapped run (the access faults with
// SIGBUS) ends the run with exit 1, a message naming the shard and the report written — never a
// runtime fault dump.
func TestExecMappedTruncation(t *testing.T) {
	dir := synthDir(t)
	cwd := t.TempDir()
	cmd := exec.Command(k3Binary(t), "run", dir, "--ids", "1,2,3", "--gen", "4000", "--no-stop", "--out", "r.json")
	cmd.Dir = cwd
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(pipe)
	truncated := false
	var lines []string
	var victim string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if !truncated && strings.HasPrefix(sc.Text(), "step    1 ") {
			shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
			for _, s := range shards {
				st, err := os.Stat(s)
				require.NoError(t, err)
				require.NoError(t, os.Truncate(s, st.Size()/2))
			}
			victim = filepath.Base(shards[0])
			truncated = true
		}
	}
	err = cmd.Wait()
	out := strings.Join(lines, "\n")
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v\n%s", err, out)
	require.Equal(t, exitRuntime, ee.ExitCode(), out)
	assert.NotContains(t, out, "goroutine ", "no runtime fault dump")
	assert.NotContains(t, out, "SIGBUS")
	assert.Contains(t, out, ".safetensors", "the message names the shard (e.g. %s)", victim)
	rep := readReport(t, filepath.Join(cwd, "r.json"))
	assert.Equal(t, "error", rep["stop_reason"])
	assert.GreaterOrEqual(t, len(ints(t, rep["generated_ids"])), 2)
}
