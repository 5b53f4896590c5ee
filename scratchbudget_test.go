package k3_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
)

// TestCacheBudgetScratch: a cache budget below TopK + 1 experts keeps no cache and bounds the
// read scratch instead: k slots (the budget rounded down), the store's MaxBatch k, a layer's
// picks read in ⌈TopK / k⌉ waves that the plan prints, and logits and greedy ids equal to the
// mapped model's, for every k below TopK on every fixture model.
func TestCacheBudgetScratch(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		want := runModel(t, openModel(t, dir), ref)
		p, err := k3.PlanFor(dir, k3.WithCacheBudget(0))
		require.NoError(t, err)
		slot, topK := p.Cache.SlotBytes, p.Cache.TopK
		require.Greater(t, topK, 1, "a fixture with one pick has no smaller scratch to test")
		for k := 1; k < topK; k++ {
			t.Run(fmt.Sprintf("slots%d", k), func(t *testing.T) {
				m := openModel(t, dir, k3.WithCacheBudget(int64(k)*slot+slot/2))
				c := m.Plan().Cache
				waves := (topK + k - 1) / k
				assert.Equal(t, [4]int{k, waves, 0, topK}, [4]int{c.ScratchSlots, c.Waves, c.Slots, c.TopK})
				assert.Equal(t, int64(k)*slot, c.ScratchBytes)
				assert.Equal(t, k, m.Stats().Cache.MaxBatch, "the store reads at most k experts at a time")
				if waves > 1 {
					assert.Contains(t, m.Plan().String(), fmt.Sprintf("read in %d waves per MoE layer", waves))
				}
				assert.Equal(t, want, runModel(t, m, ref))
			})
		}
	})
}
