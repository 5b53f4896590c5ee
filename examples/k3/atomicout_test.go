package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// execLimited runs the binary in cwd under a file size limit of blocks blocks (ulimit -f; 512 or
// 1024 bytes each depending on the shell): a write past it fails with EFBIG part-way, as on a
// full disk (Go ignores SIGXFSZ).
func execLimited(t *testing.T, cwd string, blocks int, args ...string) result {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to set the file size limit with")
	}
	cmd := exec.Command(sh, append([]string{"-c", "ulimit -f " + strconv.Itoa(blocks) + ` && exec "$0" "$@"`, k3Binary(t)}, args...)...)
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
		blocks           int // the limit: 0 fails every write; the plot needs sim-cache's own scratch file
		args             []string
	}{
		{"out", "r.json", "--out", 0, []string{"run", dir, "--ids", "1,2,3", "--gen", "40", "--no-stop", "--out", "r.json"}},
		{"dump-logits", "l.bin", "--dump-logits", 0, []string{"run", dir, "--ids", "1,2,3", "--gen", "1", "--dump-logits", "l.bin"}},
		{"save-state", "s.k3st", "--save-state", 0, []string{"run", dir, "--ids", "1,2,3", "--gen", "2", "--save-state", "s.k3st"}},
		{"write-manifest", "m.txt", "", 0, []string{"verify", dir, "--write-manifest", "m.txt"}},
		{"plot", "p.svg", "--plot", 1, []string{"sim-cache", tr, "--plot", "p.svg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cwd := t.TempDir()
			p := filepath.Join(cwd, c.file)
			require.NoError(t, os.WriteFile(p, []byte(old), 0o644))
			// A user's file of the name a fixed temporary would take is never touched.
			require.NoError(t, os.WriteFile(p+".tmp", []byte("user's"), 0o644))
			want := []string{c.file, c.file + ".tmp"}
			r := execLimited(t, cwd, c.blocks, c.args...)
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

// TestExecOutputsCheckedFirst: an output that cannot be written (its directory missing, a
// regular file in place of its directory, a special file a rename would replace, a read-only
// directory) is refused with exit 2 naming the flag before anything is read: the model
// directory does not even exist, and ladder runs no rung.
func TestExecOutputsCheckedFirst(t *testing.T) {
	tmp := t.TempDir()
	notDir := filepath.Join(tmp, "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o644))
	bad := []string{filepath.Join(tmp, "missing", "x"), filepath.Join(notDir, "x"), os.DevNull, tmp}
	if os.Geteuid() != 0 { // root writes into a read-only directory
		ro := filepath.Join(tmp, "ro")
		require.NoError(t, os.Mkdir(ro, 0o755))
		// The file itself is writable: only the directory, where the temporary goes, is not.
		require.NoError(t, os.WriteFile(filepath.Join(ro, "x"), nil, 0o644))
		require.NoError(t, os.Chmod(ro, 0o555))
		t.Cleanup(func() { os.Chmod(ro, 0o755) })
		bad = append(bad, filepath.Join(ro, "x"))
	}
	for _, p := range bad {
		for _, c := range [][]string{
			{"run", "no-such-model", "--ids", "1", "--save-state", p},
			{"run", "no-such-model", "--ids", "1", "--out", p},
			{"run", "no-such-model", "--ids", "1", "--dump-logits", p},
			{"ladder", "no-such-model", "--budgets", "1", "--ids", "1", "--out", p},
		} {
			r := execK3(t, "", "", c...)
			assert.Equal(t, exitUsage, r.code, "%v: %s", c, r.stderr)
			assert.Contains(t, r.stderr, c[len(c)-2], c)
			assert.NotContains(t, r.stderr, "no-such-model", "%v: refused before the model is read", c)
			assert.NotContains(t, r.stderr, "rung", c)
		}
	}
	fi, err := os.Stat(os.DevNull)
	require.NoError(t, err)
	require.Equal(t, os.ModeCharDevice, fi.Mode().Type()&os.ModeCharDevice, "the device is left alone")
	for _, n := range dirNames(t, tmp) {
		require.Contains(t, []string{"file", "ro"}, n, "no probe left behind")
	}
}
