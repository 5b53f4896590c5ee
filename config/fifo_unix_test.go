//go:build unix

package config

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/k3-project/k3/internal/regfile"
)

// A FIFO in place of config.json used to block Load in open(2) forever.
func TestLoadRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(p); done <- err }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, regfile.ErrNotRegular)
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}
