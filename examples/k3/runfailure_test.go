package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runTruncating runs `k3 run dir --ids 1,2,3 --gen 4000 --no-stop args... --out r.json` in cwd,
// calls truncate on the model's shards once, as soon as the first step is printed, and returns
// what the run printed on stderr and its exit error.
func runTruncating(t *testing.T, dir, cwd string, truncate func(shards []string), args ...string) (string, error) {
	t.Helper()
	argv := append([]string{"run", dir, "--ids", "1,2,3", "--gen", "4000", "--no-stop"}, args...)
	cmd := exec.Command(k3Binary(t), append(argv, "--out", "r.json")...)
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
			truncate(shards)
			truncated = true
		}
	}
	return strings.Join(lines, "\n"), cmd.Wait()
}

// TestExecExpertReadFailure: shards truncated while the run is going (the experts are read per
// token with --cache-gb 0; the trunk is pinned at load) make an expert read fail: exit 4, and
// the report is written with expert_drops > 0.
func TestExecExpertReadFailure(t *testing.T) {
	dir := synthDir(t)
	cwd := t.TempDir()
	out, err := runTruncating(t, dir, cwd, func(shards []string) {
		for _, s := range shards {
			require.NoError(t, os.Truncate(s, 200))
		}
	}, "--trunk-gb", "1", "--cache-gb", "0")
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v\n%s", err, out)
	require.Equal(t, exitInvalid, ee.ExitCode(), out)
	assert.Contains(t, out, "RUN INVALID")
	rep := readReport(t, filepath.Join(cwd, "r.json"))
	assert.Positive(t, rep["expert_drops"])
	assert.Equal(t, "error", rep["stop_reason"])
	assert.Contains(t, rep["error"], "short read")
	assert.GreaterOrEqual(t, len(ints(t, rep["generated_ids"])), 2)
}

// TestExecMappedTruncation: a shard truncated under a fully mapped run (the access faults with
// SIGBUS) ends the run with exit 1, a message naming the shard and the report written — never a
// runtime fault dump.
func TestExecMappedTruncation(t *testing.T) {
	dir := synthDir(t)
	cwd := t.TempDir()
	var victim string
	out, err := runTruncating(t, dir, cwd, func(shards []string) {
		for _, s := range shards {
			st, err := os.Stat(s)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(s, st.Size()/2))
		}
		victim = filepath.Base(shards[0])
	})
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

// TestExecUnwritableOutputs: an unwritable --out fails before anything is read (the model
// directory does not even exist).
func TestExecUnwritableOutputs(t *testing.T) {
	r := execK3(t, "", "", "run", "no-such-model", "--ids", "1", "--out", filepath.Join(t.TempDir(), "missing", "r.json"))
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--out")
	assert.NotContains(t, r.stderr, "no-such-model")
}
