//go:build unix

package config

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/k3-project/k3/internal/fileio/regular"
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
		if !errors.Is(err, regular.ErrNotRegular) {
			t.Errorf("Load of a FIFO: %v, want regular.ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}
