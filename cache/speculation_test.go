package cache_test

import (
	"testing"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/require"
)

// Speculation (§9.4) prefetches the previous token's picks of the next
// layer; it is off below 2·TopK + 8 slots. Repeating the same picks makes
// every speculative read a used one.
func TestSpeculation(t *testing.T) {
	ck, err := safetensors.Open(testkit.Path(t, "models/tiny"))
	require.NoError(t, err)
	defer ck.Close()
	layers := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	slot := cache.SlotSize(3 * (64*32 + 64*2))
	open := func(slots int) *cache.Store {
		s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: 8, TopK: 2, Budget: int64(slots) * slot},
			cache.WithSpeculation(), cache.WithPolicy(cache.LRU))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	require.False(t, open(11).Stats().Speculation)
	s := open(12)
	require.True(t, s.Stats().Speculation)
	for range 4 {
		s.BeginStep()
		for _, l := range layers {
			_, release, err := s.Experts(l, []int{l % 8, (l + 3) % 8}, nil)
			require.NoError(t, err)
			release()
		}
	}
	run := s.Stats().Run
	require.Positive(t, run.SpecReads)
	require.LessOrEqual(t, run.SpecUsed+run.SpecWasted, run.SpecReads)
	require.Positive(t, run.SpecUsed)
	require.Equal(t, run.Requests, run.Hits+run.Misses)
	require.Less(t, run.Misses, run.Requests-int64(2*len(layers)), "speculation should turn later misses into hits")
	require.Equal(t, (run.Misses+run.SpecReads)*s.ExpertBytes(), run.BytesRead)
}
