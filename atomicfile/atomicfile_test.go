package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.json")
	require.NoError(t, os.WriteFile(p, []byte("old"), 0o600))
	require.NoError(t, WriteFile(p, []byte("new content"), 0o644))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "new content", string(b))
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	require.Equal(t, []string{"out.json"}, testkit.DirNames(t, dir))
}

// TestNoFixedTempName: a user's file named like the old fixed temporary is
// never touched, and two writers of one target get different temporaries.
func TestNoFixedTempName(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "P")
	require.NoError(t, os.WriteFile(p+".tmp", []byte("user data"), 0o644))
	a, err := Create(p, 0o644)
	require.NoError(t, err)
	b, err := Create(p, 0o644)
	require.NoError(t, err)
	require.NotEqual(t, a.TempName(), b.TempName())
	require.Equal(t, dir, filepath.Dir(a.TempName()), "the temporary sits beside the target")
	_, err = a.Write([]byte("A"))
	require.NoError(t, err)
	_, err = b.Write([]byte("B"))
	require.NoError(t, err)
	require.NoFileExists(t, p, "nothing at the target before Commit")
	require.NoError(t, b.Commit())
	require.NoError(t, a.Commit())
	got, _ := os.ReadFile(p)
	require.Equal(t, "A", string(got))
	user, _ := os.ReadFile(p + ".tmp")
	require.Equal(t, "user data", string(user))
	require.ElementsMatch(t, []string{"P", "P.tmp"}, testkit.DirNames(t, dir))
}

func TestAbortLeavesTarget(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.bin")
	require.NoError(t, os.WriteFile(p, []byte("previous"), 0o644))
	a, err := Create(p, 0o644)
	require.NoError(t, err)
	_, err = a.Write([]byte("partial"))
	require.NoError(t, err)
	_, err = a.WriteAt([]byte("P"), 0)
	require.NoError(t, err)
	require.NoError(t, a.Abort())
	require.NoError(t, a.Abort(), "a second Abort is the deferred one: no error")
	_, err = a.Write([]byte("x"))
	require.ErrorIs(t, err, ErrDone)
	_, err = a.WriteAt([]byte("x"), 0)
	require.ErrorIs(t, err, ErrDone)
	require.ErrorIs(t, a.Commit(), ErrDone)
	got, _ := os.ReadFile(p)
	require.Equal(t, "previous", string(got))
	require.Equal(t, []string{"t.bin"}, testkit.DirNames(t, dir))
}

func TestCreateErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Create(filepath.Join(dir, "missing", "x"), 0o644)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = Create(dir+string(filepath.Separator), 0o644)
	require.ErrorContains(t, err, "does not name a file")
	// A directory at the target: the rename fails, the temporary goes.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "keep"), nil, 0o644))
	err = WriteFile(filepath.Join(dir, "d"), []byte("x"), 0o644)
	require.Error(t, err)
	require.ElementsMatch(t, []string{"d"}, testkit.DirNames(t, dir))
}

// TestFullDisk: a file size limit (RLIMIT_FSIZE, what a full disk looks like
// to write(2): an error part-way) in a child process. The write fails by
// name, the previous file survives whole and no temporary is left.
func TestFullDisk(t *testing.T) {
	if dir, ok := testkit.FullDiskChild("ATOMICFILE_FULL"); ok {
		err := WriteFile(filepath.Join(dir, "out"), make([]byte, 1<<20), 0o644)
		fmt.Println("RESULT", errors.Is(err, syscall.EFBIG), err)
		return
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "out")
	require.NoError(t, os.WriteFile(p, []byte("good old file"), 0o644))
	line := testkit.RunFullDisk(t, "TestFullDisk", "ATOMICFILE_FULL", dir)
	require.True(t, strings.HasPrefix(line, "RESULT true "), line)
	require.Contains(t, line, "writing "+p)
	got, _ := os.ReadFile(p)
	require.Equal(t, "good old file", string(got))
	require.Equal(t, []string{"out"}, testkit.DirNames(t, dir))
}
