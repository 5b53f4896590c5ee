package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
)

// Issue 28's identity attacks through the binary: a packed trunk of a same-geometry sibling, and
// a shard rewritten in place while run generates (§3.6, §7.7).

// sibling synthesizes a model of synthTiny's geometry from another seed: same files, same sizes,
// other weights.
func sibling(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	require.NoError(t, checkpoint.Synthesize(dir, "tiny", 9))
	return dir
}

// TestExecSiblingTrunkRefused: run and verify with a trunk packed from a sibling exit 1 naming
// trunk.json and the two models; with its own pack they succeed.
func TestExecSiblingTrunkRefused(t *testing.T) {
	src := synthTiny(t)
	tmp := t.TempDir()
	own, other := filepath.Join(tmp, "own"), filepath.Join(tmp, "other")
	require.Equal(t, exitOK, execK3(t, "", "", "pack-trunk", src, own).code)
	require.Equal(t, exitOK, execK3(t, "", "", "pack-trunk", sibling(t), other).code)
	r := execK3(t, "", "", "run", src, "--trunk", other, "--ids", "1,2", "--gen", "2")
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, filepath.Join(other, "trunk.json"))
	assert.Contains(t, r.stderr, "packed trunk of another model: packed from model ")
	assert.Empty(t, r.stdout, "no token")
	r = execK3(t, "", "", "run", src, "--trunk", own, "--ids", "1,2", "--gen", "2")
	assert.Equal(t, exitOK, r.code, r.stderr)
	r = execK3(t, "", "", "verify", src, "--trunk", other)
	assert.Equal(t, exitRuntime, r.code, r.stderr)
	assert.Contains(t, r.stderr, "packed trunk of another model")
	r = execK3(t, "", "", "verify", src, "--trunk", own)
	assert.Equal(t, exitOK, r.code, r.stderr)
}

// TestExecShardChangedMidRun: a shard overwritten in place with its sibling's bytes while run
// generates — mapped, and streamed at the floor — ends the run with exit 1 naming the shard as
// changed, instead of continuing with tokens of neither model.
func TestExecShardChangedMidRun(t *testing.T) {
	src, sib := synthTiny(t), sibling(t)
	for _, mode := range [][]string{nil, {"--preset", "floor"}} {
		t.Run(filepath.Base(src)+map[bool]string{true: "-mapped", false: "-floor"}[mode == nil], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			copyFiles(t, src, dir)
			shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
			require.NoError(t, err)
			require.NotEmpty(t, shards)
			shard := shards[0]
			data, err := os.ReadFile(filepath.Join(sib, filepath.Base(shard)))
			require.NoError(t, err)

			cmd := exec.Command(k3Binary(t), append([]string{"run", dir, "--ids", "1,2,3", "--gen", "4096"}, mode...)...)
			cmd.Dir = t.TempDir()
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			var e bytes.Buffer
			cmd.Stderr = &e
			require.NoError(t, cmd.Start())
			out := bufio.NewReader(stdout)
			// The first token is out: the run is under way. The stderr buffer is read only after
			// Wait, which ends the goroutine that copies into it.
			if _, err := out.ReadByte(); err != nil {
				werr := cmd.Wait()
				t.Fatalf("no first token: %v (exit: %v): %s", err, werr, e.String())
			}
			time.Sleep(20 * time.Millisecond) // past a file-system timestamp tick since the copy
			f, err := os.OpenFile(shard, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(data, 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			done := make(chan error, 1)
			go func() {
				_, _ = out.WriteTo(new(bytes.Buffer))
				done <- cmd.Wait()
			}()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("run did not end: %s", e.String())
			}
			ee, ok := err.(*exec.ExitError)
			require.True(t, ok, "the run finished with exit 0 after its shard changed: %v", err)
			assert.Equal(t, exitRuntime, ee.ExitCode(), e.String())
			assert.Contains(t, e.String(), shard)
			assert.Contains(t, e.String(), "changed while in use")
		})
	}
}
