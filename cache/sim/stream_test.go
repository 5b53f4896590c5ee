package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/k3-project/k3/cache/trace"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/require"
)

// writeHeaded records reqs under g and returns the trace's path.
func writeHeaded(t testing.TB, dir string, g trace.Geometry, reqs []trace.Request) string {
	w, err := trace.New(dir, g)
	require.NoError(t, err)
	for _, r := range reqs {
		w.ExpertRequest(int(r.Layer), int(r.Expert))
	}
	require.NoError(t, w.Close())
	return filepath.Join(dir, trace.TraceFile)
}

// skewed makes n requests over layers 1..layers-1 and experts 0..experts-1
// with a few hot experts, the shape that gives every policy something to do.
func skewed(seed uint64, n, layers, experts int) []trace.Request {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]trace.Request, n)
	for i := range out {
		out[i] = trace.Request{Layer: int32(1 + i%(layers-1)), Expert: int32(int(r.ExpFloat64()*float64(experts)/6) % experts)}
	}
	return out
}

// TestStreamedEqualsInMemory: RunFile (pieces, next uses on disk) gives
// exactly Run's report on the real trace, with a warning that it has no
// header.
func TestStreamedEqualsInMemory(t *testing.T) {
	reqs := realTrace(t)
	want := Run(reqs, Options{})
	got, err := RunFile(testkit.Path(t, "expert_trace.bin"), Options{TempDir: t.TempDir()})
	require.NoError(t, err)
	require.Len(t, got.Warnings, 3, "headerless, expert size and geometry assumed: %q", got.Warnings)
	require.Contains(t, got.Warnings[0], "has no header")
	got.Warnings = nil
	require.Equal(t, want, got)
}

// TestPiecesDoNotMatter: a trace longer than one piece, replayed from a
// file, agrees with the policies run one by one over the whole key slice.
func TestPiecesDoNotMatter(t *testing.T) {
	g := trace.Geometry{Layers: 5, Experts: 64, TopK: 2, MoELayers: 4, ExpertBytes: 1000}
	reqs := skewed(1, 3*piece+123, g.Layers, g.Experts)
	p := writeHeaded(t, t.TempDir(), g, reqs)
	rep, err := RunFile(p, Options{CapacitiesGB: []float64{3e-6, 10e-6, 40e-6}})
	require.NoError(t, err)
	require.Empty(t, rep.Warnings)
	keys := Keys(reqs)
	require.Len(t, rep.Rows, 3)
	for _, row := range rep.Rows {
		s := min(row.Slots, 2*rep.Distinct+2)
		require.Equal(t, Belady(keys, s), row.Belady, "%d slots", s)
		require.Equal(t, PinLRU(keys, s), row.PinLRU, "%d slots", s)
	}
	require.Equal(t, len(reqs)/8, rep.Tokens, "tokens from the header's top-k × MoE layers")
}

// TestEverySizeIsARow: a size too small to simulate is a row with the
// reason, in the order asked, never dropped.
func TestEverySizeIsARow(t *testing.T) {
	g := trace.Geometry{Layers: 3, Experts: 8, TopK: 2, MoELayers: 2, ExpertBytes: 6528}
	reqs := skewed(2, 35*4, g.Layers, g.Experts) // 35 tokens of 2 × 2 requests
	p := writeHeaded(t, t.TempDir(), g, reqs)
	sizes := []float64{6528e-9, 3 * 6528e-9, 2e-3, 100e-6} // 1, 3, 306 and 15 slots
	rep, err := RunFile(p, Options{CapacitiesGB: sizes})
	require.NoError(t, err)
	require.Equal(t, 35, rep.Tokens)
	require.Len(t, rep.Rows, 3)
	require.Len(t, rep.Unsimulated, 1)
	require.Equal(t, 1, rep.Unsimulated[0].Slots)
	require.Contains(t, rep.Unsimulated[0].Reason, "fewer than 3 slots (top-k 2 + 1)")
	require.Contains(t, rep.Unsimulated[0].Reason, "at least 19.6KB")
	lines := strings.Split(strings.TrimSpace(rep.String()), "\n")
	require.Len(t, lines, 4+len(sizes))
	for i, want := range []string{"6.53KB       1  not simulated", "19.6KB       3 ", "   2MB     306 ", " 100KB      15 "} {
		require.True(t, strings.HasPrefix(lines[4+i], want), "row %d: %q", i, lines[4+i])
	}
}

func TestHeaderChecks(t *testing.T) {
	g := trace.Geometry{Layers: 3, Experts: 8, TopK: 2, MoELayers: 2, ExpertBytes: 6528}
	p := writeHeaded(t, t.TempDir(), g, skewed(3, 40, 3, 8))
	_, err := RunFile(p, Options{ExpertBytes: 17_547_264})
	require.ErrorIs(t, err, trace.ErrExpertBytes)
	_, err = RunFile(p, Options{TopK: 16})
	require.ErrorIs(t, err, ErrGeometry)
	_, err = RunFile(p, Options{TopK: 2, MoELayers: 2, ExpertBytes: 6528, CapacitiesGB: []float64{1e-4}})
	require.NoError(t, err, "agreeing options are fine")

	// A truncated copy is refused by name before any replay.
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	q := filepath.Join(t.TempDir(), "cut.bin")
	require.NoError(t, os.WriteFile(q, b[:len(b)-8], 0o644))
	_, err = RunFile(q, Options{})
	require.ErrorIs(t, err, trace.ErrTruncated)
}

func TestProgress(t *testing.T) {
	g := trace.Geometry{Layers: 5, Experts: 64, TopK: 2, MoELayers: 4}
	reqs := skewed(4, 2*piece+5, g.Layers, g.Experts)
	p := writeHeaded(t, t.TempDir(), g, reqs)
	var last, calls int64
	_, err := RunFile(p, Options{ExpertBytes: 1000, CapacitiesGB: []float64{1e-4}, Progress: func(done, total int64) {
		require.Equal(t, int64(2*len(reqs)), total)
		require.Greater(t, done, last)
		last = done
		calls++
	}})
	require.NoError(t, err)
	require.Equal(t, int64(2*len(reqs)), last)
	require.Equal(t, int64(6), calls, "three pieces each way")
}

func TestSizeString(t *testing.T) {
	for gb, want := range map[float64]string{
		8: "8GB", 64: "64GB", 1450: "1450GB", 0.5: "500MB", 0.00167: "1.67MB", 0.000026: "26KB",
		0.0001: "100KB", 1.5: "1.5GB", 6528e-9: "6.53KB", 1e-9: "1B", 0.0123456: "12.3MB",
	} {
		require.Equal(t, want, SizeString(gb), "%v GB", gb)
	}
}

// TestMemoryIndependentOfLength: replaying a trace eight times longer (same
// keys) allocates no more than a fixed amount more. The in-memory replay
// this replaced allocated 8 + 16 bytes a request (keys and next uses) and
// the whole request slice, about 190 MB more at this length.
func TestMemoryIndependentOfLength(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	g := trace.Geometry{Layers: 9, Experts: 64, TopK: 2, MoELayers: 8, ExpertBytes: 1000}
	alloc := func(n int) uint64 {
		dir := t.TempDir()
		p := writeHeaded(t, dir, g, skewed(5, n, g.Layers, g.Experts))
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		rep, err := RunFile(p, Options{CapacitiesGB: []float64{20e-6, 200e-6}})
		runtime.ReadMemStats(&b)
		require.NoError(t, err)
		require.Equal(t, n, rep.Requests)
		return b.TotalAlloc - a.TotalAlloc
	}
	small := alloc(1 << 17)
	large := alloc(1 << 20)
	t.Logf("allocated %d bytes for 2^17 requests, %d for 2^20", small, large)
	require.Less(t, large, small+1<<20, "allocation grows with the trace's length")
	require.Less(t, large, uint64(8<<20))
}

// TestPeakRSSLargeTrace: a 64 MB trace (2^23 requests) is replayed in a
// child process whose peak resident set stays far below the trace's size
// (the replay this replaced held about 13 times the trace).
func TestPeakRSSLargeTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and replays a 64 MB trace")
	}
	if testkit.RaceEnabled {
		t.Skip("the race runtime's own memory is not the figure measured")
	}
	if dir, ok := testkit.ChildArg("SIM_LARGE"); ok {
		g := trace.Geometry{Layers: 9, Experts: 64, TopK: 2, MoELayers: 8, ExpertBytes: 1000}
		w, err := trace.New(dir, g)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(9, 9))
		const n = 1 << 23
		for i := range n {
			w.ExpertRequest(1+i%8, int(r.ExpFloat64()*10)%64)
		}
		require.NoError(t, w.Close())
		rep, err := RunFile(filepath.Join(dir, trace.TraceFile), Options{CapacitiesGB: []float64{50e-6}})
		require.NoError(t, err)
		require.Equal(t, n, rep.Requests)
		fmt.Printf("PEAK %d %d\n", testkit.PeakRSS(), rep.Requests)
		return
	}
	dir := t.TempDir()
	line := testkit.ChildLine(t, testkit.RunChild(t, "TestPeakRSSLargeTrace", "SIM_LARGE", dir), "PEAK")
	var peak, n int64
	_, err := fmt.Sscanf(line, "PEAK %d %d", &peak, &n)
	require.NoError(t, err, line)
	st, err := os.Stat(filepath.Join(dir, trace.TraceFile))
	require.NoError(t, err)
	t.Logf("trace %d bytes, %d requests; peak RSS %d bytes", st.Size(), n, peak)
	require.Less(t, peak, st.Size()/2, "the replay's peak resident set grows with the trace")
}
