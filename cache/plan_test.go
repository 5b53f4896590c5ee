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
