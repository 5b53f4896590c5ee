//go:build unix

package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestFullDiskChild(t *testing.T) {
	if dir, ok := FullDiskChild("K3_TESTKIT_FULL"); ok {
		err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 4*FullDiskLimit), 0o644)
		fmt.Println("RESULT", errors.Is(err, syscall.EFBIG))
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	if line := RunFullDisk(t, "TestFullDiskChild", "K3_TESTKIT_FULL", dir); line != "RESULT true" {
		t.Fatalf("child wrote past the limit: %q", line)
	}
	fi, err := os.Stat(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > FullDiskLimit {
		t.Fatalf("child wrote %d bytes under a %d byte limit", fi.Size(), FullDiskLimit)
	}
}
