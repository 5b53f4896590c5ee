package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// execLimited runs the binary in cwd under a file size limit of one block (ulimit -f 1): a
// write past it fails with EFBIG part-way, as on a full disk (Go ignores SIGXFSZ).
func execLimited(t *testing.T, cwd string, args ...string) result {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to set the file size limit with")
	}
	cmd := exec.Command(sh, append([]string{"-c", `ulimit -f 1 && exec "$0" "$@"`, k3Binary(t)}, args...)...)
	cmd.Dir = cwd
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, o.String(), e.String()}
}

// dirNames lists dir's entries, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// TestExecWritersFullDisk: every file the CLI writes (reports, logits, states, manifests,
// plots) goes through a temporary name: when the disk fills part-way the command exits 1
// naming the flag, the previous good file is byte for byte what it was, and no temporary or
// partial file is left beside it.
func TestExecWritersFullDisk(t *testing.T) {
	dir := synthTiny(t)
	// A trace to replay for the plot, written without a limit.
	traceDir := t.TempDir()
	r := execK3(t, traceDir, "", "run", dir, "--ids", "1", "--gen", "1", "--no-stop", "--cache-gb", "0.0001",
		"--dump-cache-trace", "tr")
	require.Equal(t, 0, r.code, r.stderr)
	tr := filepath.Join(traceDir, "tr", "expert_trace.bin")

	const old = "the previous good file\n"
	cases := []struct {
		name, file, flag string
		args             []string
	}{
		{"out", "r.json", "--out", []string{"run", dir, "--ids", "1,2,3", "--gen", "40", "--no-stop", "--out", "r.json"}},
		{"dump-logits", "l.bin", "--dump-logits", []string{"run", dir, "--ids", "1,2,3", "--gen", "1", "--dump-logits", "l.bin"}},
		{"save-state", "s.k3st", "--save-state", []string{"run", dir, "--ids", "1,2,3", "--gen", "2", "--save-state", "s.k3st"}},
		{"write-manifest", "m.txt", "", []string{"verify", dir, "--write-manifest", "m.txt"}},
		{"plot", "p.svg", "--plot", []string{"sim-cache", tr, "--plot", "p.svg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cwd := t.TempDir()
			p := filepath.Join(cwd, c.file)
			require.NoError(t, os.WriteFile(p, []byte(old), 0o644))
			// A user's file of the name a fixed temporary would take is never touched.
			require.NoError(t, os.WriteFile(p+".tmp", []byte("user's"), 0o644))
			want := []string{c.file, c.file + ".tmp"}
			r := execLimited(t, cwd, c.args...)
			require.Equal(t, exitRuntime, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, "file too large")
			if c.flag != "" {
				require.Contains(t, r.stderr, c.flag)
			}
			require.NotContains(t, r.stderr, "panic")
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Equal(t, old, string(b), "the previous file is intact")
			require.Equal(t, want, dirNames(t, cwd), "no temporary or partial file left")

			// Without the limit the same command replaces the file whole.
			r = execK3(t, cwd, "", c.args...)
			require.Equal(t, 0, r.code, r.stderr)
			b, err = os.ReadFile(p)
			require.NoError(t, err)
			require.NotEqual(t, old, string(b))
			require.Equal(t, want, dirNames(t, cwd))
			b, err = os.ReadFile(p + ".tmp")
			require.NoError(t, err)
			require.Equal(t, "user's", string(b))
		})
	}
}
