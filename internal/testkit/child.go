package testkit

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// A test that measures a fresh process (peak RSS, start-up time, exit
// codes) re-runs its own test binary as a child for just that test. The
// child is told apart by an environment variable the parent sets:
//
//	func TestX(t *testing.T) {
//		if arg, ok := testkit.ChildArg("K3_X_CHILD"); ok {
//			... work on arg, print a marked line, os.Exit ...
//		}
//		out := testkit.RunChild(t, "TestX", "K3_X_CHILD", arg)
//		line := testkit.ChildLine(t, out, "PEAK")
//	}

// ChildArg returns the value the parent passed under key, and whether this
// process is a child started by RunChild with that key.
func ChildArg(key string) (string, bool) {
	v := os.Getenv(key)
	return v, v != ""
}

// RunChild runs the test binary again for the test named test alone, with
// key=value added to its environment, and returns what it printed (stdout
// and stderr). It fails the test when the child exits non-zero or value is
// empty (the child would not know it is one).
func RunChild(tb testing.TB, test, key, value string) []byte {
	tb.Helper()
	if value == "" {
		tb.Fatalf("testkit: RunChild(%s): empty value for %s", test, key)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), key+"="+value)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("testkit: child %s: %v\n%s", test, err, out)
	}
	return out
}

// ChildLine returns the first line of out that starts with marker, from the
// marker on; the child prints its figures on such a line because the test
// framework prints its own lines around them. It fails the test when there
// is none.
func ChildLine(tb testing.TB, out []byte, marker string) string {
	tb.Helper()
	for line := range bytes.SplitSeq(out, []byte("\n")) {
		if bytes.HasPrefix(line, []byte(marker)) {
			return string(line)
		}
	}
	tb.Fatalf("testkit: no %q line in the child's output:\n%s", marker, out)
	return ""
}
