//go:build unix

package regular

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a")
	require.NoError(t, os.WriteFile(p, []byte("hello"), 0o644))
	got, err := ReadFile(p, 5)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	_, err = ReadFile(p, 4)
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = ReadFile(dir, 100)
	assert.ErrorIs(t, err, ErrNotRegular)
	_, err = ReadFile(filepath.Join(dir, "absent"), 100)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// A FIFO with no writer would block open(2) forever; it is refused at once.
func TestFIFORefusedWithoutBlocking(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(p, 100); done <- err }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrNotRegular)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "ReadFile blocked on a FIFO")
	}
}
