package k3_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
)

// TestPlanTotal: Total is the trunk's total plus the expert cache's, and
// counts only the parts a plan has.
func TestPlanTotal(t *testing.T) {
	dir := synthTiny(t, 1)
	mapped, err := k3.PlanFor(dir)
	require.NoError(t, err)
	require.Nil(t, mapped.Trunk)
	var cacheTotal int64
	if mapped.Cache != nil {
		cacheTotal = mapped.Cache.Total
	}
	assert.Equal(t, cacheTotal, mapped.Total(), "mapped: the expert part alone")

	p, err := k3.PlanFor(dir, k3.WithTrunkBudget(1<<30), k3.WithCacheBudget(1<<20))
	require.NoError(t, err)
	require.NotNil(t, p.Trunk)
	require.NotNil(t, p.Cache)
	require.Positive(t, p.Trunk.Total)
	require.Positive(t, p.Cache.Total)
	assert.Equal(t, p.Trunk.Total+p.Cache.Total, p.Total())
}
