package testkit

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDirNames(t *testing.T) {
	dir := t.TempDir()
	if got := DirNames(t, dir); got != nil {
		t.Fatalf("empty directory: %q, want nil", got)
	}
	for _, n := range []string{"b", "a.tmp", "c"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := DirNames(t, dir), []string{"a.tmp", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
