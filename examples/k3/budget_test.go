package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/preset"
)

var bin shared

// buildCLI builds this command once into a temporary directory, for tests that need a real
// process (the ladder runs one per rung).
func buildCLI(t *testing.T) string {
	t.Helper()
	return bin.get(t, func(tmp string) (string, error) {
		path := filepath.Join(tmp, "k3")
		if out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
		return path, nil
	})
}

func TestBudgetFlags(t *testing.T) {
	for _, c := range []struct{ flag, val, want string }{
		{"--trunk-gb", "abc", "not a non-negative decimal"},
		{"--trunk-gb", "-1", "not a non-negative decimal"},
		{"--trunk-gb", "0", "outside (0, 1e9]"},
		{"--trunk-gb", "1e3", "not a non-negative decimal"},
		{"--trunk-gb", "NaN", "not a non-negative decimal"},
		{"--trunk-ring", "9", "outside [1, 8]"},
		{"--trunk-slot-mb", "0.001", "below one 4096-byte page"},
		{"--trunk", "", "empty value"},
		{"--trunk-source", "shards", "needs --trunk"},
	} {
		code, _, stderr := runCLI(t, "run", "nowhere", "--ids", "1", c.flag, c.val)
		assert.Equal(t, exitUsage, code, "%s %s", c.flag, c.val)
		assert.Contains(t, stderr, c.flag)
		assert.Contains(t, stderr, c.want)
	}
}

// TestRunUnderBudgets: --trunk-gb and --trunk reproduce the reference's full_ids, print the plan
// first and report the bytes read; a budget below the floor fails naming the minimum.
func TestRunUnderBudgets(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := testkit.LoadReference(t, dir)
			packed := t.TempDir()
			code, _, stderr := runCLI(t, "pack-trunk", dir, packed)
			require.Equal(t, exitOK, code, stderr)
			for _, extra := range [][]string{
				{"--trunk-gb", "0.0002"},
				{"--trunk-gb", "0.0002", "--trunk", packed, "--trunk-ring", "1"},
				{"--trunk-gb", "1"},
			} {
				out := filepath.Join(t.TempDir(), "r.json")
				args := append([]string{"run", dir, "--ids", joinIDs(ref.PromptIDs), "--gen", itoa(len(ref.FullIDs) - len(ref.PromptIDs)),
					"--incremental", "--no-stop", "--out", out}, extra...)
				code, _, stderr := runCLI(t, args...)
				require.Equal(t, exitOK, code, stderr)
				assert.Contains(t, stderr, "memory plan")
				assert.Less(t, strings.Index(stderr, "memory plan"), strings.Index(stderr, "loaded in"), "the plan is printed before loading")
				rep := testkit.ReadJSON[struct {
					FullIDs    []int `json:"full_ids"`
					TrunkBytes int64 `json:"trunk_bytes_read"`
					Plan       struct {
						Trunk *struct {
							Total int64 `json:"total_bytes"`
						} `json:"trunk"`
					} `json:"plan"`
				}](t, out)
				assert.Equal(t, ref.FullIDs, rep.FullIDs, "%v", extra)
				require.NotNil(t, rep.Plan.Trunk)
				if extra[1] == "0.0002" {
					assert.Positive(t, rep.TrunkBytes, "streamed")
				}
			}
			code, _, stderr = runCLI(t, "run", dir, "--ids", "1", "--trunk-gb", "0.000001")
			assert.Equal(t, exitUsage, code, "a budget below the floor is a refused configuration")
			assert.Contains(t, stderr, "the minimum for this model is")
		})
	}
}

func TestLadder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	bin := buildCLI(t)
	dir := testkit.Models(t)[0]
	js := filepath.Join(t.TempDir(), "ladder.json")
	out, err := exec.Command(bin, "ladder", dir, "--budgets", "floor,0.0002,0.001,all,mapped", "--ids", "1,2,3", "--gen", "3", "--out", js).Output()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "VERDICT: all 5 rungs emitted identical ids")
	l := testkit.ReadJSON[struct {
		Rungs []rung `json:"rungs"`
	}](t, js)
	require.Len(t, l.Rungs, 5)
	for _, r := range l.Rungs {
		assert.Empty(t, r.RunError)
		assert.True(t, slices.Equal(r.GeneratedIDs, l.Rungs[0].GeneratedIDs))
		assert.Positive(t, r.PeakRSS)
	}
	assert.Equal(t, 1, l.Rungs[0].Slots, "the floor runs one slot")
	assert.Positive(t, l.Rungs[0].ReadPerToken)
}

func joinIDs(ids []int) string { return strings.Trim(strings.ReplaceAll(jsonText(ids), " ", ""), "[]") }

func itoa(n int) string { return strconv.Itoa(n) }

func TestConfigAndLayersFlags(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	alt := filepath.Join(t.TempDir(), "alt.json")
	require.NoError(t, os.WriteFile(alt, b, 0o644))
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runCLI(t, "run", dir, "--ids", joinIDs(ref.PromptIDs), "--gen", "2", "--no-stop", "--config", alt, "--layers", "3", "--out", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "running 3 of")
	rep := testkit.ReadJSON[struct {
		Requested int `json:"layers_requested"`
		Completed int `json:"layers_completed"`
		Layers    int `json:"layers"`
	}](t, out)
	assert.Equal(t, 3, rep.Requested)
	assert.Equal(t, 3, rep.Completed)
	code, _, stderr = runCLI(t, "run", dir, "--ids", "1", "--layers", "1000")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--layers")
	code, _, _ = runCLI(t, "run", dir, "--ids", "1", "--config", filepath.Join(t.TempDir(), "none.json"))
	assert.NotEqual(t, exitOK, code)
}

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
					assert.Zero(t, got.Cache.Slots, "floor has no expert cache")
					assert.Equal(t, min(got.Cache.TopK, preset.FloorScratchSlots), got.Cache.ScratchSlots, "floor's read scratch")
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
	ref := testkit.LoadReference(t, dir)
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
