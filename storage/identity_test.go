package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/faultfs"
	"github.com/k3-project/k3/storage"
)

// weightFile writes n bytes to a new file and returns its path.
func weightFile(t testing.TB, dir, name string, n int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, make([]byte, n), 0o644))
	return p
}

// requireChanged asserts that err is a *storage.ChangedError naming path.
func requireChanged(t *testing.T, err error, path string) {
	t.Helper()
	require.ErrorIs(t, err, storage.ErrChanged)
	ce, ok := errors.AsType[*storage.ChangedError](err)
	require.True(t, ok, "%v, want a *storage.ChangedError", err)
	require.Equal(t, path, ce.Path)
	require.Contains(t, err.Error(), path+": changed while in use")
}

// A Watch notices a same-size write into a watched file (mtime and ctime move), one that restores
// the mtime afterwards (ctime still moves), and a file replaced by a rename (the old file's ctime
// moves as it loses its name; the path opens another inode) — after the caller closed its
// descriptor too: the watch keeps its own.
func TestWatchNoticesChanges(t *testing.T) {
	for _, attack := range []string{"write in place", "write, mtime restored", "replaced, opened again"} {
		t.Run(attack, func(t *testing.T) {
			dir := t.TempDir()
			p := weightFile(t, dir, "shard.safetensors", 8192)
			w := storage.NewWatch(nil)
			defer w.Close()
			f, err := w.Open(p)
			require.NoError(t, err)
			require.NoError(t, f.Close(), "the caller closes its file; the watch keeps its own")
			require.NoError(t, w.Check())
			require.Equal(t, 1, w.Len())
			st, err := os.Stat(p)
			require.NoError(t, err)
			time.Sleep(20 * time.Millisecond) // past a file-system timestamp tick
			switch attack {
			case "write in place", "write, mtime restored":
				testkit.FlipBits(t, p, 4000, 0x01)
				if attack == "write, mtime restored" {
					require.NoError(t, os.Chtimes(p, st.ModTime(), st.ModTime()))
				}
				requireChanged(t, w.Check(), p)
			case "replaced, opened again":
				q := weightFile(t, dir, "new", 8192)
				require.NoError(t, os.Rename(q, p))
				// The replaced file lost its name, which moved its ctime; and the path now opens
				// another file.
				requireChanged(t, w.Check(), p)
				_, err := w.Open(p)
				requireChanged(t, err, p)
			}
		})
	}
}

// Files that are not *os.File answer through Stat: a faultfs file shrunk under the watch is a
// change of identity.
func TestWatchThroughAnOpener(t *testing.T) {
	p := weightFile(t, t.TempDir(), "w.bin", 8192)
	x := faultfs.New()
	w := storage.NewWatch(func(path string) (storage.File, error) { return x.Open(path) })
	defer w.Close()
	_, err := w.Open(p)
	require.NoError(t, err)
	require.NoError(t, w.Check())
	x.Shrink("w.bin", 4096)
	requireChanged(t, w.Check(), p)
}

// Check allocates nothing when nothing changed: it runs before and after every forward pass,
// and the decode step allocates nothing.
func TestWatchCheckAllocatesNothing(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	dir := t.TempDir()
	w := storage.NewWatch(nil)
	defer w.Close()
	for i := range 4 {
		_, err := w.Open(weightFile(t, dir, fmt.Sprint(i), 100))
		require.NoError(t, err)
	}
	testkit.NoAllocs(t, "Watch.Check", 100, func() {
		if err := w.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkWatchCheck100 is the per-pass cost on a model of 100 weight files (the real model has
// 96 shards, plus trunk.bin): run twice per forward pass.
func BenchmarkWatchCheck100(b *testing.B) {
	dir := b.TempDir()
	w := storage.NewWatch(nil)
	defer w.Close()
	for i := range 100 {
		if _, err := w.Open(weightFile(b, dir, fmt.Sprint(i), 100)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if err := w.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
