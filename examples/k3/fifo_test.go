package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
)

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
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{code, o.String(), e.String()}
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
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "k3: memory plan") {
		require.True(t, time.Now().Before(deadline), out.String())
		time.Sleep(2 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "%v: %s", err, out.String())
		assert.Equal(t, 143, ee.ExitCode(), out.String())
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the first SIGTERM did not end the process: %s", out.String())
	}
	assert.Contains(t, out.String(), "while opening the model")
	assert.NotContains(t, out.String(), "panic")
	left, err := filepath.Glob(filepath.Join(cwd, "tr", "*"))
	require.NoError(t, err)
	assert.Empty(t, left, "the trace dump's temporary file is removed")
	assert.NoFileExists(t, filepath.Join(cwd, "r.json"))
}
