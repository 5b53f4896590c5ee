//go:build unix

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
