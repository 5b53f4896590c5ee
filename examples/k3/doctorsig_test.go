package main

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
)

// TestExecDoctorInterrupted: SIGINT or SIGTERM while doctor writes its probe ends the process
// (130, 143) and leaves no probe: the file lives in a temporary directory that the signal
// removes. With a model the probe goes beside the model's directory, never into it.
func TestExecDoctorInterrupted(t *testing.T) {
	model := filepath.Join(t.TempDir(), "m")
	require.NoError(t, checkpoint.Synthesize(model, "tiny", 3)) // sparse shards: doctor writes a probe
	before := dirNames(t, model)
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
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			deadline := time.Now().Add(30 * time.Second)
			for {
				probes, _ := filepath.Glob(filepath.Join(c.where(dir), ".k3-doctor-*", ".k3-readrate-*"))
				if len(probes) > 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "no probe file appeared: %s", out.String())
				time.Sleep(5 * time.Millisecond)
			}
			require.NoError(t, cmd.Process.Signal(c.sig))
			select {
			case err := <-done:
				ee, ok := err.(*exec.ExitError)
				require.True(t, ok, "%v: %s", err, out.String())
				assert.Equal(t, c.code, ee.ExitCode(), out.String())
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("doctor did not end on %v: %s", c.sig, out.String())
			}
			left, _ := filepath.Glob(filepath.Join(c.where(dir), ".k3-doctor-*"))
			assert.Empty(t, left, "the probe directory is removed")
			assert.Contains(t, out.String(), "the probe is removed")
			assert.Equal(t, before, dirNames(t, model), "nothing written in the model directory")
		})
	}
}
