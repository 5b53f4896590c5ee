package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

func TestChild(t *testing.T) {
	if v, ok := ChildArg("K3_TESTKIT_ECHO"); ok {
		fmt.Printf("ECHO %s %d\n", v, PeakRSS())
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	line := ChildLine(t, RunChild(t, "TestChild", "K3_TESTKIT_ECHO", "hello"), "ECHO")
	var v string
	var rss int64
	if _, err := fmt.Sscanf(line, "ECHO %s %d", &v, &rss); err != nil {
		t.Fatal(err)
	}
	if v != "hello" {
		t.Fatalf("child got %q, want hello", v)
	}
	if runtime.GOOS == "linux" && rss <= 0 {
		t.Fatalf("child peak RSS %d on linux", rss)
	}
}

func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is linux's")
	}
	before := PeakRSS()
	buf := Filled(32 << 20) // every page written
	if after := PeakRSS(); before <= 0 || after < before+16<<20 {
		t.Fatalf("peak RSS %d then %d after touching %d bytes", before, after, len(buf))
	}
}

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
