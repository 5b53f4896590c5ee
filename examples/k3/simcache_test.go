package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
)

// TestExecCacheTraceSimCache: the trace a run dumps is read back by sim-cache (same request
// count as the run's cache counters) and drawn as a valid SVG.
func TestExecCacheTraceSimCache(t *testing.T) {
	dir := testkit.Models(t)[0]
	cwd := t.TempDir()
	r := execK3(t, cwd, "", "run", dir, "--ids", "1,2,3", "--gen", "6", "--no-stop", "--cache-gb", "0.0001",
		"--dump-cache-trace", "tr", "--out", "r.json")
	require.Equal(t, 0, r.code, r.stderr)
	var rep struct {
		Cache struct {
			ExpertBytes int64 `json:"expert_bytes"`
			Run         struct {
				Requests int64 `json:"requests"`
			} `json:"run"`
		} `json:"cache_stats"`
	}
	b, err := os.ReadFile(filepath.Join(cwd, "r.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Positive(t, rep.Cache.Run.Requests)

	svg := filepath.Join(cwd, "sim.svg")
	eb := rep.Cache.ExpertBytes
	sizes := []string{}
	for _, slots := range []int64{4, 8, 16, 32, 64, 128} {
		sizes = append(sizes, strconv.FormatFloat(float64(slots*eb)/1e9, 'f', -1, 64))
	}
	s := execK3(t, cwd, "", "sim-cache", filepath.Join(cwd, "tr", "expert_trace.bin"), "--expert-bytes", strconv.FormatInt(eb, 10),
		"--sizes-gb", strings.Join(sizes, ","), "--plot", svg)
	require.Equal(t, 0, s.code, s.stderr)
	assert.Contains(t, s.stdout, fmt.Sprintf("requests %d ", rep.Cache.Run.Requests))
	assert.Contains(t, s.stdout, "S3-FIFO%")
	checkSVG(t, svg, "hit rate (%)", "S3-FIFO", "Belady")

	bad := execK3(t, cwd, "", "sim-cache", filepath.Join(cwd, "tr", "expert_trace.bin"), "--plot", filepath.Join(cwd, "no", "x.svg"))
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, "--plot")
	bad = execK3(t, cwd, "", "sim-cache", "x.bin", "--sizes-gb", "2,1")
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, "does not increase")
}

// checkSVG parses the file as XML with an <svg> root and looks for the labels.
func checkSVG(t *testing.T, path string, labels ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	d := xml.NewDecoder(strings.NewReader(string(b)))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "%s is not well-formed XML", path)
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	assert.Equal(t, "svg", root)
	for _, l := range labels {
		assert.Contains(t, string(b), l)
	}
}
