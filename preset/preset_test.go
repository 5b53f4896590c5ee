package preset

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sysmem"
	"github.com/k3-project/k3/trunk"
)

func g(x float64) int64 { return int64(x * 1e9) }

func TestBudgets(t *testing.T) {
	for name, want := range map[string][2]float64{
		"laptop": {3, 1}, "desktop": {16, 10}, "workstation": {60, 30}, "server": {110, 13}, "max": {110, 109},
	} {
		tr, ca, err := Budgets(name, "no checkpoint is read")
		require.NoError(t, err, name)
		assert.Equal(t, g(want[0]), tr, name)
		assert.Equal(t, g(want[1]), ca, name)
	}
	_, _, err := Budgets("ultra", "")
	require.ErrorIs(t, err, ErrUnknown)
	assert.ErrorContains(t, err, "laptop, desktop, workstation, server, max, floor, auto")
	_, _, err = Budgets(Floor, t.TempDir())
	assert.Error(t, err, "floor of an empty directory")
}

// TestAutoBudgets checks the §11.1 rule at its three regimes.
func TestAutoBudgets(t *testing.T) {
	// 24 GB available of 25: reserve 2 + 0.48 + 4.7 + 1.7 = 8.88, usable 15.12; the trunk is
	// capped at 0.55·25 − 8.88 − 0.5 = 4.37 GB, the cache gets 0.5.
	tr, ca, err := AutoBudgets(sysmem.Info{Available: g(24), Total: g(25)})
	require.NoError(t, err)
	assert.InDelta(t, 4.37e9, float64(tr), 1e3)
	assert.Equal(t, g(0.5), ca)
	// 228 GB: usable 228 − 12.96 = 215.04 ≥ 111.5 → trunk 111, cache 104.04.
	tr, ca, err = AutoBudgets(sysmem.Info{Available: g(228), Total: g(240)})
	require.NoError(t, err)
	assert.Equal(t, g(111), tr)
	assert.InDelta(t, 104.04e9, float64(ca), 1e3)
	// A cgroup limit of 12 GB with 1 GB in use on a 64 GB machine: avail 11, usable 11 − 9.62
	// = 1.38 < 3 → refused, naming the cgroup.
	_, _, err = AutoBudgets(sysmem.Info{Available: g(60), Total: g(64), Limit: g(12), Used: g(1), Cgroup: "/box"})
	require.ErrorIs(t, err, ErrTooLittleMemory)
	assert.ErrorContains(t, err, "cgroup /box memory limit 12.00 GB")
	assert.ErrorContains(t, err, "at least 3.0 GB")
	// The cgroup lowers both the available memory and the ceiling: limit 40, 2 in use.
	tr, _, err = AutoBudgets(sysmem.Info{Available: g(100), Total: g(128), Limit: g(40), Used: g(2)})
	require.NoError(t, err)
	res := 2 + 0.02*38 + 4.7 + 1.7
	assert.InDelta(t, (0.55*40-res-0.5)*1e9, float64(tr), 1e3)
}

func TestLargest(t *testing.T) {
	_, ok := Largest(sysmem.Info{Available: g(8), Total: g(16)})
	assert.False(t, ok, "8 GB: laptop's 4 GB plus the 8.56 GB reserve does not fit")
	p, ok := Largest(sysmem.Info{Available: g(13), Total: g(16)})
	require.True(t, ok)
	assert.Equal(t, "laptop", p.Name)
	p, ok = Largest(sysmem.Info{Available: g(500), Total: g(512)})
	require.True(t, ok)
	assert.Equal(t, "max", p.Name)
	p, ok = Largest(sysmem.Info{Available: g(500), Total: g(512), Limit: g(40)})
	require.True(t, ok)
	assert.Equal(t, "desktop", p.Name, "the cgroup limit bounds the choice")
}

// TestFloorBudget: the floor is accepted and one byte less is refused.
func TestFloorBudget(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, checkpoint.Synthesize(dir, "tiny", 1))
	floor, err := FloorBudget(dir)
	require.NoError(t, err)
	require.Positive(t, floor)
	_, err = k3.PlanFor(dir, k3.WithTrunkBudget(floor))
	require.NoError(t, err)
	_, err = k3.PlanFor(dir, k3.WithTrunkBudget(floor-1))
	require.ErrorIs(t, err, trunk.ErrBudget)

	tr, ca, err := Budgets(Floor, dir)
	require.NoError(t, err)
	assert.Equal(t, floor, tr)
	assert.Zero(t, ca, "no expert cache at the floor")

	// The full budget pins every layer and the head.
	full, err := FullBudget(dir)
	require.NoError(t, err)
	p, err := k3.PlanFor(dir, k3.WithTrunkBudget(full))
	require.NoError(t, err)
	assert.Equal(t, p.Trunk.Layers, len(p.Trunk.Pinned), "every layer pinned")
	assert.True(t, p.Trunk.HeadPinned)
	assert.Equal(t, full, p.Trunk.Total, "the full plan allocates its budget")
	assert.Greater(t, full, floor)

	// A one-slot ring lowers nothing but must be honoured: the floor is planned with it.
	ring1, err := FloorBudget(dir, k3.WithTrunkRing(1))
	require.NoError(t, err)
	_, err = k3.PlanFor(dir, k3.WithTrunkRing(1), k3.WithTrunkBudget(ring1))
	require.NoError(t, err)
}

// TestTokenReads: the trunk streams its plan's bytes; experts miss every time until the cache
// holds more than one token's worth, then in proportion to what it does not hold.
func TestTokenReads(t *testing.T) {
	c := &config.Config{NumLayers: 5, FirstDense: 1, TopK: 2, NumExperts: 10} // 4 MoE layers, 8 experts a token
	tr, ex := TokenReads(c, k3.Plan{Trunk: &trunk.Plan{StreamBytes: 700}})
	assert.Equal(t, [2]int64{700, 0}, [2]int64{tr, ex}, "experts memory-mapped")
	for slots, want := range map[int]int64{0: 8 * 100, 8: 8 * 100, 20: 8 * 100 / 2, 40: 0, 80: 0} {
		_, ex := TokenReads(c, k3.Plan{Mapped: true, Cache: &cache.Plan{Slots: slots, ExpertBytes: 100}})
		assert.Equal(t, want, ex, "%d slots", slots)
	}
}

// TestSuggest: a machine below the floor plan gets no preset; one where the K3-sized auto rule
// finds no room, or finds less than the checkpoint's floor, gets the floor; a large one auto.
func TestSuggest(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, checkpoint.Synthesize(dir, "tiny", 1))
	s, err := Suggest(dir, sysmem.Info{Available: 4096, Total: 1 << 20})
	require.NoError(t, err)
	assert.Empty(t, s.Name)
	floor, err := FloorBudget(dir)
	require.NoError(t, err)
	assert.Equal(t, floor, s.Floor.Trunk.Budget)
	assert.Zero(t, s.Floor.Cache.Budget)

	s, err = Suggest(dir, sysmem.Info{Available: 8e6, Total: 16e6})
	require.NoError(t, err)
	assert.Equal(t, Floor, s.Name, "auto refuses 8 MB")
	assert.Equal(t, s.Floor, s.Plan)

	s, err = Suggest(dir, sysmem.Info{Available: g(500), Total: g(512)})
	require.NoError(t, err)
	assert.Equal(t, Auto, s.Name)
	tr, ca, err := AutoBudgets(sysmem.Info{Available: g(500), Total: g(512)})
	require.NoError(t, err)
	assert.Equal(t, [2]int64{tr, ca}, [2]int64{s.Plan.Trunk.Budget, s.Plan.Cache.Budget})
}

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
