package testkit

import (
	"os"
	"testing"
)

// DirNames returns the names of dir's entries, sorted (nil for an empty
// directory), so that a test sees every file a write left behind. It fails the
// test when dir cannot be read.
func DirNames(tb testing.TB, dir string) []string {
	tb.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
