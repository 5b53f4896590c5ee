package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/k3-project/k3/cache/trace"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeTrace runs the README's first-hour dump on a synthesized tiny model
// and returns the working directory and the trace's path.
func readmeTrace(t *testing.T) (string, string) {
	t.Helper()
	m := synthDir(t)
	cwd := t.TempDir()
	r := execK3(t, cwd, "", "run", m, "--ids", "1,2,3", "--gen", "32", "--no-stop", "--cache-gb", "0.0004",
		"--dump-cache-trace", "trace", "--out", "r.json")
	require.Equal(t, 0, r.code, r.stderr)
	return cwd, filepath.Join(cwd, "trace", trace.TraceFile)
}

// tableRows returns the table's lines after its column heading.
func tableRows(t *testing.T, stdout string) []string {
	t.Helper()
	i := strings.Index(stdout, " CACHE ")
	require.GreaterOrEqual(t, i, 0, stdout)
	_, rows, ok := strings.Cut(stdout[i:], "/TOK\n")
	require.True(t, ok, stdout)
	return strings.Split(strings.TrimRight(rows, "\n"), "\n")
}

// TestExecSimCacheReadme: the README's command prints all seven rows (before
// the geometry came from the trace, K3's 17-slot minimum dropped three), in
// readable units, with the tokens of the run rather than 1.
func TestExecSimCacheReadme(t *testing.T) {
	cwd, tr := readmeTrace(t)
	r := execK3(t, cwd, "", "sim-cache", tr, "--expert-bytes", "6528",
		"--sizes-gb", "0.000026,0.000052,0.000104,0.000209,0.000418,0.000836,0.00167")
	require.Equal(t, 0, r.code, r.stderr)
	rows := tableRows(t, r.stdout)
	require.Len(t, rows, 7, r.stdout)
	for i, unit := range []string{"26KB", "52KB", "104KB", "209KB", "418KB", "836KB", "1.67MB"} {
		assert.Equal(t, unit, strings.Fields(rows[i])[0])
		assert.NotContains(t, rows[i], "not simulated")
	}
	f, err := trace.Open(tr)
	require.NoError(t, err)
	h, _ := f.Header()
	f.Close()
	tokens := h.Records / h.RequestsPerToken()
	assert.GreaterOrEqual(t, tokens, int64(32), "32 decoded tokens each make top-k × MoE layers requests")
	assert.Contains(t, r.stdout, "tokens "+strconv.FormatInt(tokens, 10)+" ")
	assert.NotContains(t, r.stderr, "warning")
	// A small model's reads per token and seconds per token are not all 0.00.
	assert.Contains(t, r.stdout, "KB READ/TOK   MS/TOK\n")
	assert.Regexp(t, `every touched expert \d+\.\d\d KB  whole pool \d+\.\d\d KB`, r.stdout)

	// Without sizes: top-k + 1 slots doubling, every row simulated.
	d := execK3(t, cwd, "", "sim-cache", tr)
	require.Equal(t, 0, d.code, d.stderr)
	rows = tableRows(t, d.stdout)
	require.GreaterOrEqual(t, len(rows), 4)
	assert.Equal(t, "3", strings.Fields(rows[0])[1], "the first default size holds top-k + 1 slots")
}

// TestExecSimCacheRefusals: a truncated trace, a contradicting expert size
// and a table without a simulated row exit 2 with the cause named; a size
// too small is a row, not a silent omission.
func TestExecSimCacheRefusals(t *testing.T) {
	cwd, tr := readmeTrace(t)
	b, err := os.ReadFile(tr)
	require.NoError(t, err)
	cut := filepath.Join(cwd, "cut.bin")
	require.NoError(t, os.WriteFile(cut, b[:len(b)-8], 0o644))
	r := execK3(t, cwd, "", "sim-cache", cut)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "trace: truncated")
	assert.Empty(t, r.stdout)

	r = execK3(t, cwd, "", "sim-cache", tr, "--expert-bytes", "17547264")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "expert size differs from the trace's: 17547264 bytes given, the trace was recorded with 6528")

	r = execK3(t, cwd, "", "sim-cache", tr, "--sizes-gb", "0.00001,0.000015") // 1 and 2 slots
	assert.Equal(t, exitUsage, r.code)
	rows := tableRows(t, r.stdout)
	require.Len(t, rows, 2)
	assert.Contains(t, rows[0], "10KB       1  not simulated: fewer than 3 slots")
	assert.Contains(t, r.stderr, "none of the 2 sizes could be simulated")

	r = execK3(t, cwd, "", "sim-cache", tr, "--sizes-gb", "0.00001,0.0001")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Len(t, tableRows(t, r.stdout), 2, "the size too small is still a row")
}

// TestExecSimCacheHeaderless: the original form is replayed with a warning,
// and --model supplies its geometry.
func TestExecSimCacheHeaderless(t *testing.T) {
	cwd, tr := readmeTrace(t)
	b, err := os.ReadFile(tr)
	require.NoError(t, err)
	old := filepath.Join(cwd, "old.bin")
	require.NoError(t, os.WriteFile(old, b[trace.HeaderSize:], 0o644))
	r := execK3(t, cwd, "", "sim-cache", old, "--expert-bytes", "6528", "--sizes-gb", "0.001")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "warning: "+old+" has no header")
	assert.Contains(t, r.stderr, "K3's top-k 16 × 92 MoE layers assumed")

	withModel := execK3(t, cwd, "", "sim-cache", old, "--model", synthDir(t), "--sizes-gb", "0.001")
	require.Equal(t, 0, withModel.code, withModel.stderr)
	assert.Contains(t, withModel.stderr, "has no header")
	assert.NotContains(t, withModel.stderr, "assumed")
	headed := execK3(t, cwd, "", "sim-cache", tr, "--sizes-gb", "0.001")
	require.Equal(t, 0, headed.code, headed.stderr)
	assert.Equal(t, headed.stdout, withModel.stdout, "--model gives a headerless trace the header's geometry")
}

// TestSparseProgress: a line at most every five seconds, none at the end.
func TestSparseProgress(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	p := sparseProgress(&b, func() time.Time { return now })
	p(10, 100)
	assert.Empty(t, b.String(), "nothing within the first five seconds")
	now = now.Add(6 * time.Second)
	p(25, 100)
	now = now.Add(time.Second)
	p(30, 100)
	now = now.Add(10 * time.Second)
	p(100, 100)
	assert.Equal(t, "k3: sim-cache: 25% of the replay after 6 s\n", b.String())
}

// TestExecSimCacheFIFO: a FIFO in place of the trace is refused at once
// (exit 1, named), never opened in a way that blocks.
func TestExecSimCacheFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo.bin")
	require.NoError(t, syscall.Mkfifo(p, 0o644))
	r := execBounded(t, 30*time.Second, "sim-cache", p)
	assert.Equal(t, exitRuntime, r.code)
	assert.Contains(t, r.stdout+r.stderr, "not a regular file")
}

// dumpTrace runs the first fixture model for gen tokens under a tiny expert cache with
// --dump-cache-trace tr and --out r.json in a new directory, and returns the model's
// directory and that one.
func dumpTrace(t *testing.T, gen int) (dir, cwd string) {
	t.Helper()
	dir, cwd = testkit.Models(t)[0], t.TempDir()
	r := execK3(t, cwd, "", "run", dir, "--ids", "1,2,3", "--gen", strconv.Itoa(gen), "--no-stop", "--cache-gb", "0.0001",
		"--dump-cache-trace", "tr", "--out", "r.json")
	require.Equal(t, 0, r.code, r.stderr)
	return dir, cwd
}

// TestExecCacheTraceSimCache: the trace a run dumps is read back by sim-cache (same request
// count as the run's cache counters) and drawn as a valid SVG.
func TestExecCacheTraceSimCache(t *testing.T) {
	_, cwd := dumpTrace(t, 6)
	rep := testkit.ReadJSON[struct {
		Cache struct {
			ExpertBytes int64 `json:"expert_bytes"`
			Run         struct {
				Requests int64 `json:"requests"`
			} `json:"run"`
		} `json:"cache_stats"`
	}](t, filepath.Join(cwd, "r.json"))
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

// TestExecTraceDumpHeader: the dumped trace carries the model's geometry
// and exactly the records the run's cache counted.
func TestExecTraceDumpHeader(t *testing.T) {
	dir, cwd := dumpTrace(t, 4)
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	tr, err := trace.Open(filepath.Join(cwd, "tr", trace.TraceFile))
	require.NoError(t, err)
	defer tr.Close()
	h, ok := tr.Header()
	require.True(t, ok, "the dump has a header")
	require.Equal(t, cfg.NumLayers, h.Layers)
	require.Equal(t, cfg.NumExperts, h.Experts)
	require.Equal(t, cfg.TopK, h.TopK)
	require.Equal(t, cfg.NumLayers-cfg.FirstDense, h.MoELayers)
	require.Positive(t, h.ExpertBytes)
	require.Positive(t, h.Records)
	es, err := os.ReadDir(filepath.Join(cwd, "tr"))
	require.NoError(t, err)
	require.Len(t, es, 2, "the trace and its histogram, no temporaries")
}

// TestExecTraceDumpFullDisk: a dump that cannot be written whole (a file
// size limit, which write(2) reports part-way as a full disk does) exits
// non-zero, names the dump, and leaves no expert_trace.bin.
func TestExecTraceDumpFullDisk(t *testing.T) {
	dir := testkit.Models(t)[0]
	cwd := t.TempDir()
	// One block is less than the trace of 12 tokens, whichever block size the shell counts.
	r := execLimited(t, cwd, 1, "run", dir, "--ids", "1,2,3,4",
		"--gen", "8", "--no-stop", "--cache-gb", "0.0001", "--dump-cache-trace", "tr", "--out", "r.json")
	out := r.stdout + r.stderr
	require.Equal(t, exitRuntime, r.code, "%s", out)
	require.Contains(t, out, "k3: --dump-cache-trace: trace: ")
	require.Contains(t, out, "file too large")
	es, err := os.ReadDir(filepath.Join(cwd, "tr"))
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	require.Empty(t, names, "nothing left in the dump directory")
	require.False(t, strings.Contains(out, "panic"))
}

// TestTraceDumpSignal: SIGTERM stops generation; the trace of what ran is
// still completed (exit 143), whole and readable.
func TestTraceDumpSignal(t *testing.T) {
	dir := synthTiny(t)
	td := filepath.Join(t.TempDir(), "tr")
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	a, err := parseArgs([]string{dir, "--ids", "1,2", "--gen", "50", "--no-stop", "--cache-gb", "0.0001",
		"--dump-cache-trace", td, "--out", filepath.Join(t.TempDir(), "r.json")}, runCmd.flags)
	require.NoError(t, err)
	o, err := parseRun(a)
	require.NoError(t, err)
	var so, se bytes.Buffer
	require.Equal(t, 143, decode(o, &so, &se, sigs), se.String())
	tr, err := trace.Open(filepath.Join(td, trace.TraceFile))
	require.NoError(t, err)
	defer tr.Close()
	h, ok := tr.Header()
	require.True(t, ok)
	require.Positive(t, h.Records)
	_, err = tr.Requests()
	require.NoError(t, err)
}

// TestTraceDumpEarlyFailure: a run refused before it generates (a cache
// budget below the floor) leaves no trace, not an empty one that a replay
// would accept.
func TestTraceDumpEarlyFailure(t *testing.T) {
	dir := synthTiny(t)
	td := filepath.Join(t.TempDir(), "tr")
	a, err := parseArgs([]string{dir, "--ids", "1,2", "--gen", "4", "--cache-gb", "0.000001",
		"--dump-cache-trace", td, "--out", filepath.Join(t.TempDir(), "r.json")}, runCmd.flags)
	require.NoError(t, err)
	o, err := parseRun(a)
	require.NoError(t, err)
	var so, se bytes.Buffer
	require.Equal(t, exitUsage, decode(o, &so, &se, make(chan os.Signal)), se.String())
	require.Contains(t, se.String(), "cache")
	es, err := os.ReadDir(td)
	require.NoError(t, err)
	require.Empty(t, es)
}
