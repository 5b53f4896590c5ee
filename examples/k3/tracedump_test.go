package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
