package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// buildCLI builds this command once into a temporary directory, for tests that need a real
// process (the ladder runs one per rung).
func buildCLI(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		d, err := os.MkdirTemp("", "k3-bin-*")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(d, "k3")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = &exec.ExitError{}
			t.Logf("go build: %s", out)
		}
	})
	require.NoError(t, binErr)
	return binPath
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
			ref := readRef(t, dir)
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
				var rep struct {
					FullIDs    []int `json:"full_ids"`
					TrunkBytes int64 `json:"trunk_bytes_read"`
					Plan       struct {
						Trunk *struct {
							Total int64 `json:"total_bytes"`
						} `json:"trunk"`
					} `json:"plan"`
				}
				b, err := os.ReadFile(out)
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(b, &rep))
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
	var l struct {
		Rungs []rung `json:"rungs"`
	}
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &l))
	require.Len(t, l.Rungs, 5)
	for _, r := range l.Rungs {
		assert.Empty(t, r.RunError)
		assert.True(t, slices.Equal(r.GeneratedIDs, l.Rungs[0].GeneratedIDs))
		assert.Positive(t, r.PeakRSS)
	}
	assert.Equal(t, 1, l.Rungs[0].Slots, "the floor runs one slot")
	assert.Positive(t, l.Rungs[0].ReadPerToken)
}

type fixtureRef struct {
	PromptIDs []int `json:"prompt_ids"`
	FullIDs   []int `json:"full_ids"`
}

func readRef(t *testing.T, dir string) fixtureRef {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	require.NoError(t, err)
	var r fixtureRef
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

func joinIDs(ids []int) string { return strings.Trim(strings.ReplaceAll(jsonText(ids), " ", ""), "[]") }

func itoa(n int) string { return strconv.Itoa(n) }

func TestConfigAndLayersFlags(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := readRef(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	alt := filepath.Join(t.TempDir(), "alt.json")
	require.NoError(t, os.WriteFile(alt, b, 0o644))
	out := filepath.Join(t.TempDir(), "r.json")
	code, _, stderr := runCLI(t, "run", dir, "--ids", joinIDs(ref.PromptIDs), "--gen", "2", "--no-stop", "--config", alt, "--layers", "3", "--out", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "running 3 of")
	var rep struct {
		Requested int `json:"layers_requested"`
		Completed int `json:"layers_completed"`
		Layers    int `json:"layers"`
	}
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.Equal(t, 3, rep.Requested)
	assert.Equal(t, 3, rep.Completed)
	code, _, stderr = runCLI(t, "run", dir, "--ids", "1", "--layers", "1000")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--layers")
	code, _, _ = runCLI(t, "run", dir, "--ids", "1", "--config", filepath.Join(t.TempDir(), "none.json"))
	assert.NotEqual(t, exitOK, code)
}
