package cache_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/cache/sim"
	"github.com/k3-project/k3/cache/trace"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/require"
)

const fixExpertBytes = 1632

func openFixture(t testing.TB) *safetensors.Checkpoint {
	t.Helper()
	ck, err := safetensors.Open(testkit.Path(t, "cache/model-00001-of-00001.safetensors"))
	require.NoError(t, err)
	t.Cleanup(func() { ck.Close() })
	return ck
}

func fixtureStore(t testing.TB, ck *safetensors.Checkpoint, topK, slots int, opts ...cache.Option) *cache.Store {
	t.Helper()
	s, err := cache.New(ck, cache.Config{Layers: []int{0}, NumExperts: 24, TopK: topK,
		Budget: int64(slots) * cache.SlotSize(fixExpertBytes)}, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// get requests one expert and releases it at once.
func get(t testing.TB, s *cache.Store, layer, e int) {
	t.Helper()
	_, release, err := s.Experts(layer, []int{e}, nil)
	require.NoError(t, err)
	release()
}

// A hand-computed sequence over 3 slots, A B C A D A B E A C B E:
//
//	LRU:     hits at 4, 6, 9 (3); 9 misses; 6 evictions.
//	S3-FIFO: smallTarget 1. D evicts B (A, freq 1, moves to MAIN); B comes
//	back from GHOST into MAIN; E evicts D; C (in GHOST) evicts E and joins
//	MAIN; B hits; E evicts C from MAIN after A and B used their second
//	chances: hits at 4, 6, 9, 11 (4); 8 misses; 5 evictions.
func TestHandComputedSequence(t *testing.T) {
	seq := []int{0, 1, 2, 0, 3, 0, 1, 4, 0, 2, 1, 4}
	want := map[cache.PolicyName]struct {
		hitsAt              []int
		hits, misses, evict int64
	}{
		cache.LRU:    {[]int{3, 5, 8}, 3, 9, 6},
		cache.S3FIFO: {[]int{3, 5, 8, 10}, 4, 8, 5},
	}
	ck := openFixture(t)
	for pol, w := range want {
		t.Run(string(pol), func(t *testing.T) {
			s := fixtureStore(t, ck, 2, 3, cache.WithPolicy(pol))
			require.Equal(t, 3, s.Slots())
			var hitsAt []int
			for i, e := range seq {
				s.BeginStep()
				get(t, s, 0, e)
				st := s.Stats().Step
				require.Equal(t, int64(1), st.Requests)
				if st.Hits == 1 {
					hitsAt = append(hitsAt, i)
					require.Equal(t, int64(1), st.TrueHits, "content from an earlier step is a true hit")
				}
			}
			run := s.Stats().Run
			require.Equal(t, w.hitsAt, hitsAt)
			require.Equal(t, w.hits, run.Hits)
			require.Equal(t, w.misses, run.Misses)
			require.Equal(t, w.evict, run.Evictions)
			require.Equal(t, int64(len(seq)), run.Requests)
			require.Equal(t, w.misses*fixExpertBytes, run.BytesRead)
			require.InDelta(t, float64(len(seq)-int(w.evict))/float64(len(seq)), run.Retention, 1e-12)

			keys := make([]uint64, len(seq))
			for i, e := range seq {
				keys[i] = uint64(e)
			}
			p, err := cache.NewPolicy(pol, 3)
			require.NoError(t, err)
			out := sim.Replay(keys, p, 3, sim.ReplayOptions{})
			require.Equal(t, sim.Outcome{Hits: w.hits, Misses: w.misses, Evictions: w.evict}, out)
		})
	}
}

// A hit on content published in the same step is not a true hit.
func TestTrueHitNeedsAnEarlierStep(t *testing.T) {
	s := fixtureStore(t, openFixture(t), 4, 8)
	s.BeginStep()
	get(t, s, 0, 5)
	get(t, s, 0, 5)
	st := s.Stats().Step
	require.Equal(t, int64(1), st.Hits)
	require.Zero(t, st.TrueHits)
	s.BeginStep()
	get(t, s, 0, 5)
	st = s.Stats().Step
	require.Equal(t, int64(1), st.TrueHits)
	require.Equal(t, 1.0, st.TrueHitRate)
	require.Equal(t, int64(3), s.Stats().Run.Requests)
	require.Equal(t, int64(2), s.Stats().Steps)
}

// A leased expert is never evicted; with every slot leased a new expert is
// refused with ErrNoEvictableSlot rather than overwriting one.
func TestLeasesPreventEviction(t *testing.T) {
	ck := openFixture(t)
	for _, pol := range []cache.PolicyName{cache.LRU, cache.S3FIFO} {
		s := fixtureStore(t, ck, 4, 5, cache.WithPolicy(pol))
		held, release, err := s.Experts(0, []int{0}, nil)
		require.NoError(t, err)
		for e := 1; e < 24; e++ {
			get(t, s, 0, e)
		}
		st := s.Stats()
		require.Equal(t, 1, st.Leased)
		before := st.Run.Hits
		get(t, s, 0, 0)
		require.Equal(t, before+1, s.Stats().Run.Hits, "%s: the leased expert must still be resident", pol)
		_ = held
		release()

		var rels []func()
		for e := range 5 {
			_, r, err := s.Experts(0, []int{e}, nil)
			require.NoError(t, err)
			rels = append(rels, r)
		}
		_, _, err = s.Experts(0, []int{9}, nil)
		require.ErrorIs(t, err, cache.ErrNoEvictableSlot)
		var le *cache.ExpertLoadError
		require.ErrorAs(t, err, &le)
		require.Equal(t, 9, le.Expert)
		for _, r := range rels {
			r()
		}
		get(t, s, 0, 9)
		require.Zero(t, s.Stats().Leased)
	}
}

// waitFor polls until cond holds (background reads), failing after 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out waiting for background reads")
		}
	}
}

// Prefetch then get: the gets are hits served by prefetched slots
// (prefetchReads ≤ hits), apart from demand misses; predictions are scored;
// an unused prefetched expert that is evicted counts as wasted.
func TestPrefetchThenGet(t *testing.T) {
	ck := openFixture(t)
	s := fixtureStore(t, ck, 4, 12, cache.WithPolicy(cache.LRU))
	s.Prefetch(0, []int{1, 2, 3, 4})
	out, release, err := s.Experts(0, []int{1, 2, 3, 4}, nil)
	require.NoError(t, err)
	require.Len(t, out, 4)
	release()
	run := s.Stats().Run
	require.Equal(t, int64(4), run.PrefetchReads)
	require.LessOrEqual(t, run.PrefetchReads, run.Hits)
	require.Equal(t, int64(4), run.Hits)
	require.Zero(t, run.Misses)
	require.Equal(t, int64(4), run.PrefetchUsed)
	require.Equal(t, int64(4), run.Predicted)
	require.Equal(t, int64(4), run.PredictedHits)
	require.Equal(t, 1.0, run.PredictRecall)

	// A half-right prediction; the wrong one is evicted unused later.
	s.Prefetch(0, []int{5, 6})
	waitFor(t, func() bool { return s.Stats().Run.PrefetchReads == 6 })
	_, release, err = s.Experts(0, []int{5, 7}, nil)
	require.NoError(t, err)
	release()
	run = s.Stats().Run
	require.Equal(t, int64(6), run.Predicted)
	require.Equal(t, int64(5), run.PredictedHits)
	require.Equal(t, int64(6), run.PredictedActual)
	require.InDelta(t, 5.0/6, run.PredictPrecision, 1e-12)
	for e := 8; e < 24; e++ {
		get(t, s, 0, e)
	}
	run = s.Stats().Run
	require.Equal(t, int64(5), run.PrefetchUsed)
	require.Equal(t, int64(1), run.PrefetchWasted)
	require.Equal(t, run.Requests, run.Hits+run.Misses)
	require.Equal(t, (run.Misses+run.PrefetchReads)*fixExpertBytes, run.BytesRead)
	require.Equal(t, 6*int64(fixExpertBytes), run.PrefetchBytes)
}

// Prefetch never evicts a leased slot and never blocks: with every slot
// leased it drops the prediction.
func TestPrefetchRespectsLeases(t *testing.T) {
	s := fixtureStore(t, openFixture(t), 4, 8)
	_, release, err := s.Experts(0, []int{0, 1, 2, 3}, nil)
	require.NoError(t, err)
	_, release2, err := s.Experts(0, []int{4, 5, 6, 7}, nil)
	require.NoError(t, err)
	s.Prefetch(0, []int{10, 11})
	st := s.Stats()
	require.Equal(t, int64(2), st.Run.PrefetchDropped)
	require.Zero(t, st.Run.PrefetchReads)
	require.Equal(t, 8, st.Leased)
	release()
	release2()
}

// Background reads never take the last TopK + 1 slots, and a demand call
// that finds only background reads in the way waits for them instead of
// failing.
func TestPrefetchLeavesTheWorkingSet(t *testing.T) {
	s := fixtureStore(t, openFixture(t), 4, 5)
	s.Prefetch(0, []int{10, 11, 12})
	require.Equal(t, int64(3), s.Stats().Run.PrefetchDropped) // 5 slots = TopK + 1: no room for prefetch
	s2 := fixtureStore(t, openFixture(t), 4, 8)
	for round := range 20 {
		s2.Prefetch(0, []int{(round + 9) % 24, (round + 13) % 24, (round + 17) % 24})
		_, release, err := s2.Experts(0, []int{round % 24, (round + 1) % 24, (round + 2) % 24, (round + 3) % 24}, nil)
		require.NoError(t, err)
		release()
	}
	run := s2.Stats().Run
	require.Positive(t, run.PrefetchReads)
	require.Zero(t, run.Failures)
}

// Replaying the Store's own trace at its slot count and policy gives
// exactly its hit and eviction counts: the simulator runs the same Policy
// code. Leases matter for S3-FIFO at small sizes, so the replay holds each
// layer's run of requests, as the Store's leases do.
func TestReplayOwnTrace(t *testing.T) {
	ck, err := safetensors.Open(testkit.Path(t, "models/tiny"))
	require.NoError(t, err)
	defer ck.Close()
	layers := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	expertBytes := int64(3 * (64*32 + 64*2))
	for _, pol := range []cache.PolicyName{cache.LRU, cache.S3FIFO} {
		for _, slots := range []int{3, 5, 8, 13, 40, 96} {
			t.Run(fmt.Sprintf("%s/%d", pol, slots), func(t *testing.T) {
				dir := t.TempDir()
				tw, err := trace.Create(dir, 13, 8)
				require.NoError(t, err)
				s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: 8, TopK: 2, Budget: int64(slots) * cache.SlotSize(expertBytes)},
					cache.WithPolicy(pol), cache.WithTracer(tw))
				require.NoError(t, err)
				defer s.Close()
				require.Equal(t, slots, s.Slots())
				r := rand.New(rand.NewPCG(uint64(slots), 5))
				var dst []moe.Expert
				for range 40 { // tokens
					s.BeginStep()
					for _, l := range layers {
						// skewed picks so that some experts come back
						a := int(r.ExpFloat64()*1.5) % 8
						b := (a + 1 + r.IntN(7)) % 8
						out, release, err := s.Experts(l, []int{a, b}, dst)
						require.NoError(t, err)
						release()
						dst = out
					}
				}
				require.NoError(t, tw.Close())
				run := s.Stats().Run
				tr, err := trace.Open(filepath.Join(dir, trace.TraceFile))
				require.NoError(t, err)
				defer tr.Close()
				reqs, err := tr.Requests()
				require.NoError(t, err)
				require.Equal(t, int(run.Requests), len(reqs))
				p, _ := cache.NewPolicy(pol, slots)
				out := sim.Replay(sim.Keys(reqs), p, slots, sim.ReplayOptions{HoldLayerRun: true})
				require.Equal(t, run.Hits, out.Hits, "hits")
				require.Equal(t, run.Misses, out.Misses, "misses")
				require.Equal(t, run.Evictions, out.Evictions, "evictions")
				if pol == cache.LRU { // LRU never picks a slot of the running call here
					p, _ := cache.NewPolicy(pol, slots)
					require.Equal(t, out, sim.Replay(sim.Keys(reqs), p, slots, sim.ReplayOptions{}))
				}
				hist, err := os.ReadFile(filepath.Join(dir, trace.HistFile))
				require.NoError(t, err)
				require.Contains(t, string(hist), `{"n_layers":13,"n_experts":8,"counts":{"1,`)
			})
		}
	}
}

func TestUnknownPolicyAndBadConfig(t *testing.T) {
	ck := openFixture(t)
	_, err := cache.ParsePolicy("random")
	require.ErrorIs(t, err, cache.ErrUnknownPolicy)
	p, err := cache.ParsePolicy("lru")
	require.NoError(t, err)
	require.Equal(t, cache.LRU, p)
	for _, cfg := range []cache.Config{
		{Layers: []int{0}, NumExperts: 24, TopK: 0},
		{Layers: []int{0}, NumExperts: 24, TopK: 25},
		{Layers: nil, NumExperts: 24, TopK: 4},
		{Layers: []int{0, 0}, NumExperts: 24, TopK: 4},
		{Layers: []int{0}, NumExperts: 24, TopK: 4, Budget: -1},
	} {
		_, err := cache.New(ck, cfg)
		require.Error(t, err, "%+v", cfg)
	}
	s := fixtureStore(t, ck, 4, 5)
	require.NoError(t, s.Close())
	_, _, err = s.Experts(0, []int{1}, nil)
	require.True(t, errors.Is(err, cache.ErrClosed), "%v", err)
}
