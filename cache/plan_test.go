package cache_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/cache"
)

// A plan's slots are whole slots of the budget; a zero budget plans TopK
// slots of scratch; a budget below TopK + 1 slots is refused with the
// minimum in the message.
func TestNewPlan(t *testing.T) {
	eb := int64(3 * (64*32 + 64*2))
	slot := cache.SlotSize(eb)
	p, err := cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 2, Budget: 10*slot + 1, Prefetch: 3})
	require.NoError(t, err)
	assert.Equal(t, cache.Plan{Budget: 10*slot + 1, Policy: string(cache.S3FIFO), ExpertBytes: eb, SlotBytes: slot,
		Slots: 10, Prefetch: 3, TopK: 2, Total: 10 * slot}, *p)

	p, err = cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 2, Policy: cache.LRU})
	require.NoError(t, err)
	assert.Equal(t, 2*slot, p.ScratchBytes)
	assert.Equal(t, p.ScratchBytes, p.Total)
	assert.Equal(t, string(cache.LRU), p.Policy)

	_, err = cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 2, Budget: slot - 1})
	require.ErrorIs(t, err, cache.ErrBudgetTooSmall)
	assert.Contains(t, err.Error(), "the minimum is")
}

// TestPlanScratchBudget: a budget from one slot up to below TopK + 1 slots plans no cache and
// a read scratch of as many slots as it holds, at most TopK, read in ⌈TopK / slots⌉ waves whose
// cost the plan states; one byte less than a slot is refused, naming both minimums; TopK + 1
// slots is a cache.
func TestPlanScratchBudget(t *testing.T) {
	eb := int64(3 * (64*32 + 64*2))
	slot := cache.SlotSize(eb)
	for _, c := range []struct {
		budget       int64
		slots, waves int
	}{
		{slot, 1, 8}, {2*slot - 1, 1, 8}, {3*slot + 7, 3, 3}, {4 * slot, 4, 2}, {7 * slot, 7, 2}, {9*slot - 1, 8, 1},
	} {
		p, err := cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 8, Budget: c.budget})
		require.NoError(t, err, c.budget)
		assert.Equal(t, [3]int{c.slots, c.waves, 0}, [3]int{p.ScratchSlots, p.Waves, p.Slots}, "budget %d", c.budget)
		assert.Equal(t, int64(c.slots)*slot, p.ScratchBytes)
		assert.Equal(t, p.ScratchBytes, p.Total)
		assert.Equal(t, c.waves > 1, p.WaveCost() != "", "a cost is stated exactly when there are waves")
	}
	p, err := cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 8, Budget: 9 * slot})
	require.NoError(t, err)
	assert.Equal(t, [2]int{9, 0}, [2]int{p.Slots, p.ScratchSlots}, "TopK + 1 slots is a cache")

	_, err = cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 8, Budget: slot - 1})
	require.ErrorIs(t, err, cache.ErrBudgetTooSmall)
	assert.ErrorContains(t, err, "for a read scratch")
}
