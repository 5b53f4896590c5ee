package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/k3-project/k3/internal/testkit/faultfs"
	"github.com/k3-project/k3/storage"
)

// The fault-injecting files of tests go through the same seam as real ones.
var _ storage.File = (*faultfs.File)(nil)

// Open gives an *os.File for a regular file and Size follows the file as it
// changes; a FIFO is refused at once instead of blocking.
func TestOpenAndSize(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "w.bin")
	if err := os.WriteFile(p, make([]byte, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := storage.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(*os.File); !ok {
		t.Errorf("Open returned %T, want *os.File (mapping and O_DIRECT depend on it)", f)
	}
	if n, err := storage.Size(f); err != nil || n != 5000 {
		t.Errorf("Size = %d, %v; want 5000", n, err)
	}
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	if n, err := storage.Size(f); err != nil || n != 100 {
		t.Errorf("Size after truncation = %d, %v; want 100", n, err)
	}

	x := faultfs.New()
	x.Shrink("w.bin", 10)
	ff, err := x.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ff.Close()
	if n, err := storage.Size(ff); err != nil || n != 10 {
		t.Errorf("Size through faultfs = %d, %v; want 10", n, err)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if _, err := storage.Open(fifo); !errors.Is(err, storage.ErrNotRegular) {
		t.Errorf("Open(FIFO) = %v, want ErrNotRegular", err)
	}
}
