package sim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/cache/trace"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/require"
)

// The required simulator output of §9.8 for the real trace.
var table98 = []struct {
	gb                                float64
	slots                             int
	lru, s3, belady, pin, gbS3, gbLRU float64
}{
	{8, 455, 36.24, 35.32, 39.42, 37.82, 16.71, 16.47},
	{16, 911, 36.24, 36.11, 42.61, 39.42, 16.50, 16.47},
	{32, 1823, 36.24, 42.68, 48.99, 42.57, 14.81, 16.47},
	{64, 3647, 36.24, 49.97, 61.74, 48.66, 12.92, 16.47},
	{128, 7294, 49.19, 73.65, 84.59, 62.86, 6.81, 13.12},
}

func realTrace(t *testing.T) []trace.Request {
	t.Helper()
	tr, err := trace.Open(testkit.Path(t, "expert_trace.bin"))
	require.NoError(t, err)
	defer tr.Close()
	reqs, err := tr.Requests()
	require.NoError(t, err)
	return reqs
}

func TestRealTraceTable(t *testing.T) {
	reqs := realTrace(t)
	rep := Run(reqs, Options{})
	require.Equal(t, 100_096, rep.Requests)
	require.Equal(t, 10_010, rep.Distinct)
	require.Equal(t, 68, rep.Tokens)
	require.InDelta(t, 90.0, rep.ReusePct, 0.005)
	require.InDelta(t, 175.65, rep.NeededGB, 0.005)
	require.InDelta(t, 1446.46, rep.PoolGB, 0.005)
	hot := []KeyCount{{Layer: 4, Expert: 520, Count: 68}, {Layer: 24, Expert: 136, Count: 68}, {Layer: 32, Expert: 276, Count: 67},
		{Layer: 83, Expert: 827, Count: 66}, {Layer: 81, Expert: 395, Count: 65}, {Layer: 3, Expert: 515, Count: 63}}
	require.Len(t, rep.Hottest, 6)
	for i, h := range hot {
		require.Equal(t, [3]int64{int64(h.Layer), int64(h.Expert), h.Count},
			[3]int64{int64(rep.Hottest[i].Layer), int64(rep.Hottest[i].Expert), rep.Hottest[i].Count})
	}
	require.Len(t, rep.Rows, len(DefaultCapacitiesGB))
	for i, want := range table98 {
		row := rep.Rows[i]
		require.Equal(t, want.gb, row.GB)
		require.Equal(t, want.slots, row.Slots)
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"LRU", row.LRU.HitRate(), want.lru}, {"S3-FIFO", row.S3FIFO.HitRate(), want.s3},
			{"Belady", row.Belady.HitRate(), want.belady}, {"PIN+LRU", row.PinLRU.HitRate(), want.pin},
			{"GB/tok S3-FIFO", row.GBReadPerToken, want.gbS3}, {"GB/tok LRU", row.LRUGBReadPerToken, want.gbLRU},
		} {
			require.InDelta(t, c.want, c.got, 0.1, "%v GB %s", want.gb, c.name)
		}
	}
	for _, row := range rep.Rows[len(table98):] { // ≥ 192 GB: everything fits
		require.GreaterOrEqual(t, row.Slots, 10941)
		for _, o := range []Outcome{row.LRU, row.S3FIFO, row.Belady, row.PinLRU} {
			require.InDelta(t, 90.0, o.HitRate(), 0.1)
		}
		require.InDelta(t, 2.58, row.GBReadPerToken, 0.01)
	}
	text := rep.String()
	for _, s := range []string{"CACHE", "SLOTS", "LRU%", "S3-FIFO%", "BELADY%", "PIN+LRU%", "GB READ/TOK", "SEC/TOK",
		"L4/e520 ×68", "  64GB    3647   36.24     49.97    61.74     48.66        12.92    10.47"} {
		require.Contains(t, text, s)
	}
}

// Hand-computed small cases for the future-knowledge policies.
func TestBeladyAndPinByHand(t *testing.T) {
	// A B C A B D A B, 2 slots. Belady: A, B miss (fill); C miss, residents
	// A (next 3) and B (next 4) are both needed before C (never): bypass;
	// A, B hit; D bypassed; A, B hit → 4 hits, 0 evictions.
	keys := []uint64{1, 2, 3, 1, 2, 4, 1, 2}
	require.Equal(t, Outcome{Hits: 4, Misses: 4}, Belady(keys, 2))
	// A B A C A B, 2 slots: C is never used again, so it is bypassed and
	// A and B stay: hits at A, A, B.
	require.Equal(t, Outcome{Hits: 3, Misses: 3}, Belady([]uint64{1, 2, 1, 3, 1, 2}, 2))
	// Eviction when the newcomer is needed sooner: A B C C A, 2 slots: at C
	// the farthest resident is B (never) → evict B, insert C; C hit; A hit.
	require.Equal(t, Outcome{Hits: 2, Misses: 3, Evictions: 1}, Belady([]uint64{1, 2, 3, 3, 1}, 2))

	// PIN+LRU, 4 slots: npin 2 = the two most frequent (A ×3, then B and C
	// ×2 tie → B, first seen earlier); C, D, E share 2 LRU slots.
	// A B C A B D C E A → A: m h h; B: m h; C D C E over LRU-2: C m, D m,
	// C h, E m evicting D → hits 4 (A×2, B, C), 1 eviction.
	seq := []uint64{1, 2, 3, 1, 2, 4, 3, 5, 1}
	require.Equal(t, Outcome{Hits: 4, Misses: 5, Evictions: 1}, PinLRU(seq, 4))
}

// The simulator's S3-FIFO and LRU are the cache package's types (a
// compile-time fact) and agree with a from-scratch replay of §9.3 on the
// hand-computed sequence of the cache tests.
func TestReplayHandSequence(t *testing.T) {
	seq := []uint64{0, 1, 2, 0, 3, 0, 1, 4, 0, 2, 1, 4}
	require.Equal(t, Outcome{Hits: 3, Misses: 9, Evictions: 6}, Replay(seq, cache.NewLRU(3), 3, ReplayOptions{}))
	require.Equal(t, Outcome{Hits: 4, Misses: 8, Evictions: 5}, Replay(seq, cache.NewS3FIFO(3), 3, ReplayOptions{}))
}

func TestEmptyAndTinyTraces(t *testing.T) {
	rep := Run(nil, Options{})
	require.Zero(t, rep.Requests)
	require.Equal(t, 1, rep.Tokens)
	require.Empty(t, rep.Hottest)
	require.NotEmpty(t, rep.String())
	rep = Run([]trace.Request{{Layer: 1, Expert: 2}, {Layer: 1, Expert: 2}}, Options{ExpertBytes: 1e9, CapacitiesGB: []float64{10, 100}})
	require.Len(t, rep.Rows, 1) // 10 slots < 17 skipped
	require.Equal(t, 100, rep.Rows[0].Slots)
	require.Equal(t, 50.0, rep.Rows[0].S3FIFO.HitRate())
	require.True(t, strings.Contains(rep.String(), "100GB"))
}

func TestRunFile(t *testing.T) {
	rep, err := RunFile(testkit.Path(t, "expert_trace.bin"), Options{CapacitiesGB: []float64{64}})
	require.NoError(t, err)
	require.Len(t, rep.Rows, 1)
	require.InDelta(t, 49.97, rep.Rows[0].S3FIFO.HitRate(), 0.1)
	_, err = RunFile(filepath.Join(t.TempDir(), "none.bin"), Options{})
	require.Error(t, err)
}

// TestHugeCapacityBounded: tiny experts make the nominal slot counts enormous; the replay is
// bounded by the trace and gives the compulsory-miss ceiling.
func TestHugeCapacityBounded(t *testing.T) {
	reqs := []trace.Request{{Layer: 1, Expert: 2}, {Layer: 1, Expert: 3}, {Layer: 1, Expert: 2}, {Layer: 2, Expert: 2}}
	rep := Run(reqs, Options{ExpertBytes: 1})
	require.NotEmpty(t, rep.Rows)
	for _, r := range rep.Rows {
		for _, o := range []Outcome{r.LRU, r.S3FIFO, r.Belady, r.PinLRU} {
			require.EqualValues(t, 1, o.Hits, "%v GB: %+v", r.GB, o)
		}
	}
}

// TestOutcomesOrder: Outcomes follows PolicyNames, the names the table prints.
func TestOutcomesOrder(t *testing.T) {
	r := Row{LRU: Outcome{Hits: 1}, S3FIFO: Outcome{Hits: 2}, Belady: Outcome{Hits: 3}, PinLRU: Outcome{Hits: 4}}
	for i, o := range r.Outcomes() {
		require.Equal(t, int64(i+1), o.Hits, PolicyNames[i])
	}
}
