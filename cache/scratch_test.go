package cache_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/moe"
)

// scratchSizes are the scratch slot counts worth testing for top-k k: one,
// about half, one short of k, and k itself (0, today's default).
func scratchSizes(k int) []int {
	out := []int{0, 1}
	if k/2 > 1 {
		out = append(out, k/2)
	}
	if k-1 > max(1, k/2) {
		out = append(out, k-1)
	}
	return out
}

// With a zero budget, a read scratch of fewer than TopK slots gives every
// fixture model's MoE layers the bits of today's TopK-slot scratch (and of
// the mapped experts), for 1 and 2 workers, decode steps and a prefill
// chunk; the store never holds more than its slots in one call.
func TestScratchSlotsBitIdentical(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, ck, layers, weights, memSrc := mappedModel(t, dir)
			shapes := modelShapes(c)
			r := rand.New(rand.NewPCG(11, 12))
			inputs := stepInputs(r, c.Hidden, 3, 17) // the prefill chunk's union needs several waves even of TopK
			for _, workers := range []int{1, 2} {
				want := mappedOutputs(t, c, layers, workers, weights, memSrc, inputs)
				for _, n := range scratchSizes(c.TopK) {
					name := fmt.Sprintf("workers=%d/scratch=%d", workers, n)
					s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK,
						Shapes: shapes, ScratchSlots: n}, cache.WithReadWorkers(workers))
					require.NoError(t, err, name)
					require.Equal(t, cmp.Or(n, c.TopK), s.MaxBatch(), name)
					for i, x := range inputs {
						s.BeginStep()
						for _, l := range layers {
							m, err := moe.New(moeConfig(c, l, workers), weights[l], s)
							require.NoError(t, err)
							out := make([]float32, len(x))
							require.NoError(t, m.Forward(out, x, len(x)/c.Hidden), name)
							testkit.RequireSameBits(t, fmt.Sprintf("%s layer %d input %d", name, l, i), out, want[[2]int{l, i}])
						}
					}
					st := s.Stats()
					require.Zero(t, st.Leased, name)
					require.Equal(t, st.Run.Requests, st.Run.Misses, name)
					// A caller that asks more than the scratch holds is refused, not served past it.
					if n > 0 && n < c.TopK {
						ids := make([]int, n+1)
						for i := range ids {
							ids[i] = i
						}
						_, _, err := s.Experts(layers[0], ids, nil)
						require.ErrorIs(t, err, cache.ErrBatchTooLarge, name)
					}
					require.NoError(t, s.Close())
				}
			}
		})
	}
}

func TestScratchSlotsPlan(t *testing.T) {
	eb := int64(17_547_264)
	slot := cache.SlotSize(eb)
	p, err := cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 16})
	require.NoError(t, err)
	require.Equal(t, [3]int64{16, 1, 16 * slot}, [3]int64{int64(p.ScratchSlots), int64(p.Waves), p.ScratchBytes})
	p, err = cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 16, ScratchSlots: 5})
	require.NoError(t, err)
	require.Equal(t, [3]int64{5, 4, 5 * slot}, [3]int64{int64(p.ScratchSlots), int64(p.Waves), p.ScratchBytes})
	require.Equal(t, p.ScratchBytes, p.Total)
	for _, c := range []cache.PlanConfig{
		{ExpertBytes: eb, TopK: 16, ScratchSlots: 17},
		{ExpertBytes: eb, TopK: 16, ScratchSlots: -1},
		{ExpertBytes: eb, TopK: 16, ScratchSlots: 4, Budget: 20 * slot},
	} {
		_, err := cache.NewPlan(c)
		require.Error(t, err, "%+v", c)
	}
	c, ck := openModelDir(t, testkit.Models(t)[0])
	_, err = cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, ScratchSlots: c.TopK + 1})
	require.ErrorContains(t, err, fmt.Sprintf("ScratchSlots %d: want 1 to TopK = %d", c.TopK+1, c.TopK))
	_, err = cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, ScratchSlots: 1, Budget: 1 << 30})
	require.ErrorContains(t, err, "the scratch is for a zero budget")
}

// BenchmarkScratchWaves is one decode token through every MoE layer with a
// zero budget, for a full scratch and fewer slots (the waves' cost), on
// each fixture model and, when K3_PERF_DIR names one, the perf checkpoint.
func BenchmarkScratchWaves(b *testing.B) {
	dirs := testkit.Models(b)
	if d := os.Getenv(testkit.PerfEnv); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		c, ck := openModelDir(b, dir)
		layers := moeLayers(c)
		ms := map[int]moe.Weights{}
		for _, l := range layers {
			ms[l] = moeWeights(b, ck, c, l)
		}
		x := make([]float32, c.Hidden)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for _, n := range scratchSizes(c.TopK) {
			b.Run(fmt.Sprintf("%s/topk=%d/scratch=%d", filepath.Base(dir), c.TopK, cmp.Or(n, c.TopK)), func(b *testing.B) {
				s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK,
					Shapes: modelShapes(c), ScratchSlots: n})
				require.NoError(b, err)
				defer s.Close()
				mm := map[int]*moe.MoE{}
				for _, l := range layers {
					mm[l], err = moe.New(moeConfig(c, l, 1), ms[l], s)
					require.NoError(b, err)
				}
				out := make([]float32, c.Hidden)
				ws := moe.NewWorkspace()
				for b.Loop() {
					for _, l := range layers {
						if err := mm[l].ForwardRoutedWith(out, x, 1, nil, ws); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
