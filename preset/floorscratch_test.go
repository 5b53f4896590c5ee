package preset

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sysmem"
)

// TestFloorScratch: the floor preset asks for a read scratch of FloorScratchSlots experts when
// TopK is larger, and the TopK scratch (budget 0) otherwise.
func TestFloorScratch(t *testing.T) {
	for topK, want := range map[int]int64{1: 0, FloorScratchSlots: 0, FloorScratchSlots + 1: FloorScratchSlots * 4096, 16: FloorScratchSlots * 4096} {
		assert.Equal(t, want, floorScratch(&cache.Plan{TopK: topK, SlotBytes: 4096}), "TopK %d", topK)
	}
}

// TestFloorBudgetsScratch: on a fixture with TopK 8 the floor preset's budgets plan the trunk
// floor and a scratch of FloorScratchSlots experts read in waves, TopK − FloorScratchSlots
// slots below the budget-0 plan; Suggest's floor plan is that plan.
func TestFloorBudgetsScratch(t *testing.T) {
	var dir string
	for _, d := range testkit.Models(t) {
		if filepath.Base(d) == "wide" {
			dir = d
		}
	}
	require.NotEmpty(t, dir, "the wide fixture (top-k 8)")
	tr, ca, err := Budgets(Floor, dir)
	require.NoError(t, err)
	floor, err := FloorBudget(dir)
	require.NoError(t, err)
	assert.Equal(t, floor, tr)
	p, err := k3.PlanFor(dir, k3.WithTrunkBudget(tr), k3.WithCacheBudget(ca))
	require.NoError(t, err)
	c := p.Cache
	require.Equal(t, 8, c.TopK)
	assert.Equal(t, [3]int{FloorScratchSlots, (8 + FloorScratchSlots - 1) / FloorScratchSlots, 0}, [3]int{c.ScratchSlots, c.Waves, c.Slots})
	p0, err := k3.PlanFor(dir, k3.WithTrunkBudget(tr), k3.WithCacheBudget(0))
	require.NoError(t, err)
	assert.Equal(t, int64(8-FloorScratchSlots)*c.SlotBytes, p0.Total()-p.Total())

	s, err := Suggest(dir, sysmem.Info{Available: 8e6, Total: 16e6})
	require.NoError(t, err)
	assert.Equal(t, p.Cache, s.Floor.Cache)
}
