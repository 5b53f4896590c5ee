package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/k3-project/k3/cache/trace"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/require"
)

// TestExecTraceDumpHeader: the dumped trace carries the model's geometry
// and exactly the records the run's cache counted.
func TestExecTraceDumpHeader(t *testing.T) {
	dir := testkit.Models(t)[0]
	cwd := t.TempDir()
	r := execK3(t, cwd, "", "run", dir, "--ids", "1,2,3", "--gen", "4", "--no-stop", "--cache-gb", "0.0001",
		"--dump-cache-trace", "tr", "--out", "r.json")
	require.Equal(t, 0, r.code, r.stderr)
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	tr, err := trace.Open(filepath.Join(cwd, "tr", trace.TraceFile))
	require.NoError(t, err)
	defer tr.Close()
	h, ok := tr.Header()
	require.True(t, ok, "the dump has a header")
	require.Equal(t, cfg.NumLayers, h.Layers)
	require.Equal(t, cfg.NumExperts, h.Experts)
	require.Equal(t, cfg.TopK, h.TopK)
	require.Equal(t, cfg.NumLayers-cfg.FirstDense, h.MoELayers)
	require.Positive(t, h.ExpertBytes)
	require.Positive(t, h.Records)
	es, err := os.ReadDir(filepath.Join(cwd, "tr"))
	require.NoError(t, err)
	require.Len(t, es, 2, "the trace and its histogram, no temporaries")
}

// TestExecTraceDumpFullDisk: a dump that cannot be written whole (a file
// size limit, which write(2) reports part-way as a full disk does) exits
// non-zero, names the dump, and leaves no expert_trace.bin.
func TestExecTraceDumpFullDisk(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to set the file size limit with")
	}
	dir := testkit.Models(t)[0]
	cwd := t.TempDir()
	// ulimit -f counts 512- or 1024-byte blocks depending on the shell: 1 block is less than the
	// trace of 12 tokens either way. Go ignores SIGXFSZ, so writes fail with EFBIG.
	cmd := exec.Command(sh, "-c", `ulimit -f 1 && exec "$0" "$@"`, k3Binary(t), "run", dir, "--ids", "1,2,3,4",
		"--gen", "8", "--no-stop", "--cache-gb", "0.0001", "--dump-cache-trace", "tr", "--out", "r.json")
	cmd.Dir = cwd
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "want a non-zero exit, got %v\n%s", err, out)
	require.Equal(t, exitRuntime, ee.ExitCode(), "%s", out)
	require.Contains(t, string(out), "k3: --dump-cache-trace: trace: ")
	require.Contains(t, string(out), "file too large")
	es, err := os.ReadDir(filepath.Join(cwd, "tr"))
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	require.Empty(t, names, "nothing left in the dump directory")
	require.False(t, strings.Contains(string(out), "panic"))
}

// TestTraceDumpSignal: SIGTERM stops generation; the trace of what ran is
// still completed (exit 143), whole and readable.
func TestTraceDumpSignal(t *testing.T) {
	dir := synthTiny(t)
	td := filepath.Join(t.TempDir(), "tr")
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	a, err := parseArgs([]string{dir, "--ids", "1,2", "--gen", "50", "--no-stop", "--cache-gb", "0.0001",
		"--dump-cache-trace", td, "--out", filepath.Join(t.TempDir(), "r.json")}, runCmd.flags)
	require.NoError(t, err)
	o, err := parseRun(a)
	require.NoError(t, err)
	var so, se bytes.Buffer
	require.Equal(t, 143, decode(o, &so, &se, sigs), se.String())
	tr, err := trace.Open(filepath.Join(td, trace.TraceFile))
	require.NoError(t, err)
	defer tr.Close()
	h, ok := tr.Header()
	require.True(t, ok)
	require.Positive(t, h.Records)
	_, err = tr.Requests()
	require.NoError(t, err)
}

// TestTraceDumpEarlyFailure: a run refused before it generates (a cache
// budget below the floor) leaves no trace, not an empty one that a replay
// would accept.
func TestTraceDumpEarlyFailure(t *testing.T) {
	dir := synthTiny(t)
	td := filepath.Join(t.TempDir(), "tr")
	a, err := parseArgs([]string{dir, "--ids", "1,2", "--gen", "4", "--cache-gb", "0.000001",
		"--dump-cache-trace", td, "--out", filepath.Join(t.TempDir(), "r.json")}, runCmd.flags)
	require.NoError(t, err)
	o, err := parseRun(a)
	require.NoError(t, err)
	var so, se bytes.Buffer
	require.Equal(t, exitUsage, decode(o, &so, &se, make(chan os.Signal)), se.String())
	require.Contains(t, se.String(), "cache")
	es, err := os.ReadDir(td)
	require.NoError(t, err)
	require.Empty(t, es)
}
