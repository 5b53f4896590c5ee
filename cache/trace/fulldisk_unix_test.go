//go:build unix

package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/require"
)

// TestFullDiskLeavesNoTrace: a dump that cannot be written whole (here a
// file size limit, which write(2) reports as a full disk would be, part-way)
// fails at Close and leaves the previous dump in place and no temporary.
func TestFullDiskLeavesNoTrace(t *testing.T) {
	if dir, ok := testkit.FullDiskChild("TRACE_FULL"); ok {
		w, err := New(dir, tinyGeo)
		if err != nil {
			fmt.Println("RESULT new", err)
			return
		}
		for i := range 100_000 {
			w.ExpertRequest(1+i%12, i%8)
		}
		fmt.Println("RESULT close", w.Close())
		return
	}
	p := writeTrace(t, tinyGeo, []Request{{1, 0}})
	dir := filepath.Dir(p)
	before, err := os.ReadFile(p)
	require.NoError(t, err)
	line := testkit.RunFullDisk(t, "TestFullDiskLeavesNoTrace", "TRACE_FULL", dir)
	require.True(t, strings.HasPrefix(line, "RESULT close trace: "), line)
	require.Contains(t, line, "file too large")
	after, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, before, after, "the previous trace is untouched")
	es, _ := os.ReadDir(dir)
	require.Len(t, es, 2, "no temporary left: %v", es)
}
