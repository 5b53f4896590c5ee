package testkit

import (
	"fmt"
	"os"
	"runtime"
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
