package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
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
	return exited(t, cmd.Run(), o.String(), e.String())
}

// exited is the result of a run that ended with err (nil or an exit status) and printed
// stdout and stderr; any other error fails the test.
func exited(t *testing.T, err error, stdout, stderr string) result {
	t.Helper()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, stdout, stderr}
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
			require.Equal(t, want, testkit.DirNames(t, cwd), "no temporary or partial file left")

			// Without the limit the same command replaces the file whole.
			r = execK3(t, cwd, "", c.args...)
			require.Equal(t, 0, r.code, r.stderr)
			b, err = os.ReadFile(p)
			require.NoError(t, err)
			require.NotEqual(t, old, string(b))
			require.Equal(t, want, testkit.DirNames(t, cwd))
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
	for _, n := range testkit.DirNames(t, tmp) {
		require.Contains(t, []string{"file", "ro"}, n, "no probe left behind")
	}
}

// copyFiles copies the regular files of src (not recursively) into a new directory dst.
func copyFiles(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	es, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range es {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
}

// fifoInPlace replaces path by a FIFO nobody writes to: opening it for reading blocks.
func fifoInPlace(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o644))
}

// execBounded runs the binary and fails the test (killing it) when it has not ended within d.
func execBounded(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	cmd := exec.Command(k3Binary(t), args...)
	cmd.Dir = t.TempDir()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return exited(t, err, o.String(), e.String())
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v blocked for %v: %s", args, d, e.String())
		return result{}
	}
}

// TestExecFIFOsRefused: a FIFO in place of a file the program reads (a shard for verify, a
// manifest, a packed trunk's trunk.json or trunk.bin, a K3ST state) is refused by name, without
// blocking on its open.
func TestExecFIFOsRefused(t *testing.T) {
	src := synthTiny(t)
	tmp := t.TempDir()

	shardFIFO := filepath.Join(tmp, "shard")
	copyFiles(t, src, shardFIFO)
	shards, err := filepath.Glob(filepath.Join(shardFIFO, "*.safetensors"))
	require.NoError(t, err)
	require.NotEmpty(t, shards)
	fifoInPlace(t, shards[0])
	r := execBounded(t, 20*time.Second, "verify", shardFIFO)
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, filepath.Base(shards[0])+": ")
	assert.Contains(t, r.stderr, "not a regular file")
	// Without an index every *.safetensors file is opened: the FIFO is still refused.
	require.NoError(t, os.Remove(filepath.Join(shardFIFO, "model.safetensors.index.json")))
	r = execBounded(t, 20*time.Second, "verify", shardFIFO)
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not a regular file")

	manifest := filepath.Join(tmp, "manifest")
	require.NoError(t, syscall.Mkfifo(manifest, 0o644))
	r = execBounded(t, 20*time.Second, "verify", src, "--manifest", manifest)
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--manifest")
	assert.Contains(t, r.stderr, "not a regular file")

	packed := filepath.Join(tmp, "packed")
	r = execK3(t, "", "", "pack-trunk", src, packed)
	require.Equal(t, 0, r.code, r.stderr)
	for _, name := range []string{"trunk.json", "trunk.bin"} {
		bad := filepath.Join(tmp, "fifo-"+name)
		copyFiles(t, packed, bad)
		fifoInPlace(t, filepath.Join(bad, name))
		r = execBounded(t, 20*time.Second, "run", src, "--trunk", bad, "--ids", "1", "--gen", "2")
		assert.Equal(t, exitRuntime, r.code, r.stderr)
		assert.Contains(t, r.stderr, name)
		assert.Contains(t, r.stderr, "not a regular file")
	}

	state := filepath.Join(tmp, "state")
	require.NoError(t, syscall.Mkfifo(state, 0o644))
	r = execBounded(t, 20*time.Second, "run", src, "--ids", "1", "--gen", "2", "--load-state", state)
	assert.NotEqual(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--load-state")
	assert.Contains(t, r.stderr, "not a regular file")
}

// TestExecFirstSignalWhileOpening: the first SIGTERM while the model is being opened ends the
// process at once (143) and names what it stopped; it is not held until a token that has not
// started. The k3 geometry opens for about a second and its first token takes far longer.
func TestExecFirstSignalWhileOpening(t *testing.T) {
	if testing.Short() {
		t.Skip("writes the sparse k3 geometry")
	}
	model := filepath.Join(t.TempDir(), "k3")
	require.NoError(t, checkpoint.Synthesize(model, "k3", 1))
	cwd := t.TempDir()
	cmd := exec.Command(k3Binary(t), "run", model, "--ids", "1", "--gen", "1", "--preset", "floor",
		"--out", "r.json", "--dump-cache-trace", "tr")
	cmd.Dir = cwd
	var out syncBuffer
	signalWhen(t, cmd, &out, 60*time.Second, func() bool { return strings.Contains(out.String(), "k3: memory plan") },
		syscall.SIGTERM, 143, 15*time.Second)
	assert.Contains(t, out.String(), "while opening the model")
	assert.NotContains(t, out.String(), "panic")
	left, err := filepath.Glob(filepath.Join(cwd, "tr", "*"))
	require.NoError(t, err)
	assert.Empty(t, left, "the trace dump's temporary file is removed")
	assert.NoFileExists(t, filepath.Join(cwd, "r.json"))
}

// TestExecDoctorInterrupted: SIGINT or SIGTERM while doctor writes its probe ends the process
// (130, 143) and leaves no probe: the file lives in a temporary directory that the signal
// removes. With a model the probe goes beside the model's directory, never into it.
func TestExecDoctorInterrupted(t *testing.T) {
	model := filepath.Join(t.TempDir(), "m")
	require.NoError(t, checkpoint.Synthesize(model, "tiny", 3)) // sparse shards: doctor writes a probe
	before := testkit.DirNames(t, model)
	for _, c := range []struct {
		name string
		sig  syscall.Signal
		code int
		args func(dir string) []string
		// where the probe directory appears
		where func(dir string) string
	}{
		{"SIGINT --dir", syscall.SIGINT, 130, func(dir string) []string { return []string{"doctor", "--dir", dir} },
			func(dir string) string { return dir }},
		{"SIGTERM model", syscall.SIGTERM, 143, func(string) []string { return []string{"doctor", model} },
			func(string) string { return filepath.Dir(model) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			// A probe far larger than 5 s of writing: the signal always arrives mid-probe.
			cmd := exec.Command(k3Binary(t), append(c.args(dir), "--probe-mb", "8192", "--seconds", "60")...)
			var out syncBuffer
			signalWhen(t, cmd, &out, 30*time.Second, func() bool {
				probes, _ := filepath.Glob(filepath.Join(c.where(dir), ".k3-doctor-*", ".k3-readrate-*"))
				return len(probes) > 0 // the probe file is being written
			}, c.sig, c.code, 20*time.Second)
			left, _ := filepath.Glob(filepath.Join(c.where(dir), ".k3-doctor-*"))
			assert.Empty(t, left, "the probe directory is removed")
			assert.Contains(t, out.String(), "the probe is removed")
			assert.Equal(t, before, testkit.DirNames(t, model), "nothing written in the model directory")
		})
	}
}

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
// token with --cache-gb 0; the trunk is pinned at load) are named as changed by the check after
// the pass (§7.7), even when an expert read failed first — before that check the failed read was
// reported and exited 4 — so the run ends with exit 1 and the report is written. An expert read
// that fails on a file that did not change still exits 4 (cache_test.go drives that in-process).
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
	require.Equal(t, exitRuntime, ee.ExitCode(), out)
	assert.Contains(t, out, "changed while in use")
	rep := readReport(t, filepath.Join(cwd, "r.json"))
	assert.Equal(t, "error", rep["stop_reason"])
	assert.Contains(t, rep["error"], ".safetensors: changed while in use")
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

// signalWhen starts cmd with stdout and stderr in out, sends it sig once ready reports true
// (failing the test when that takes longer than readyWithin) and requires it to exit with code
// within exitWithin (killing it otherwise).
func signalWhen(t *testing.T, cmd *exec.Cmd, out *syncBuffer, readyWithin time.Duration, ready func() bool,
	sig syscall.Signal, code int, exitWithin time.Duration) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(readyWithin)
	for !ready() {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("not ready to signal after %v: %s", readyWithin, out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(sig))
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "%v: %s", err, out.String())
		assert.Equal(t, code, ee.ExitCode(), out.String())
	case <-time.After(exitWithin):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not end the process within %v: %s", sig, exitWithin, out.String())
	}
}
