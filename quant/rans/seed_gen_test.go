package rans

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteSeeds regenerates testdata/fuzz/FuzzDecode when K3_WRITE_SEEDS=1.
func TestWriteSeeds(t *testing.T) {
	if os.Getenv("K3_WRITE_SEEDS") != "1" {
		t.Skip("set K3_WRITE_SEEDS=1 to regenerate the fuzz seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	c := corpus(t)
	names := make([]string, 0, len(c))
	for n, rec := range c {
		if len(rec) < 600 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", c[n])
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644))
	}
}
