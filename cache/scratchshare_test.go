package cache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Without a cache, calls take the read scratch slot by slot: two calls of
// half the scratch, the second made while the first is leased (as the
// MoE's overlapped half-waves are), read into disjoint slots of the one
// scratch arena, and both keep their own experts. A call that finds too
// few free slots gets an arena of its own, pooled for the next such call;
// every slot is free again once all are released.
func TestScratchSharedByOverlappingCalls(t *testing.T) {
	ck := openFixture(t)
	z, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: fixTopK})
	require.NoError(t, err)
	defer z.Close()
	require.True(t, z.OverlapWaves())

	first, second := []int{1, 2}, []int{3, 4}
	a, relA, err := z.Experts(0, first, nil)
	require.NoError(t, err)
	b, relB, err := z.Experts(0, second, nil)
	require.NoError(t, err)
	for i, e := range first {
		checkViews(t, ck, e, a[i]) // the second call wrote none of the first's slots
	}
	for i, e := range second {
		checkViews(t, ck, e, b[i])
	}
	require.Empty(t, z.scratch, "two half-scratch calls must fit the shared scratch")
	require.Empty(t, z.scratchFree)

	c, relC, err := z.Experts(0, []int{5}, nil) // the shared scratch is full
	require.NoError(t, err)
	checkViews(t, ck, 5, c[0])
	for i, e := range first {
		checkViews(t, ck, e, a[i])
	}
	relA()
	relB()
	relC()
	require.Len(t, z.scratch, 1, "the overflow arena is pooled, not unmapped and remapped")
	require.Len(t, z.scratchFree, fixTopK)
	st := z.Stats().Run
	require.Equal(t, [3]int64{5, 5, 5 * fixExpertBytes}, [3]int64{st.Requests, st.Misses, st.BytesRead})
}

// Only a zero budget with a scratch of two slots or more overlaps waves: a
// cache could not give two calls their slots at once, and one slot cannot
// be halved.
func TestOverlapWavesOnlyWithoutCache(t *testing.T) {
	ck := openFixture(t)
	slot := SlotSize(fixExpertBytes)
	for _, c := range []struct {
		budget  int64
		scratch int
		want    bool
	}{{0, 0, true}, {0, 2, true}, {0, 1, false}, {int64(fixTopK+1) * slot, 0, false}} {
		s, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: fixTopK, Budget: c.budget, ScratchSlots: c.scratch})
		require.NoError(t, err)
		require.Equal(t, c.want, s.OverlapWaves(), "budget %d scratch slots %d", c.budget, c.scratch)
		require.NoError(t, s.Close())
	}
}
