package k3_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
)

// TestPerfFloorBitIdentical runs the synthetic perf checkpoint (random weights everywhere, so a
// wrong byte anywhere would show) at the memory floor — trunk at its floor budget with one ring
// slot, embedding rows and lm_head streamed, experts read with a zero cache budget — and compares
// teacher-forced logits and an incremental greedy continuation bit for bit with the fully mapped
// run. It needs K3_PERF_DIR (the perf checkpoint, about 1.6 GB, synthesized there on first use)
// and takes a minute or two.
func TestPerfFloorBitIdentical(t *testing.T) {
	dir := testkit.PerfDir(t, checkpoint.Synthesize)
	ref := &testkit.Reference{PromptIDs: []int{11, 2048, 7, 31000, 5}, FullIDs: []int{11, 2048, 7, 31000, 5, 0, 0, 0}}
	mapped := openModel(t, dir)
	want := runModel(t, mapped, ref)
	mapped.Close()
	p, err := k3.PlanFor(dir, k3.WithTrunkBudget(1<<50))
	require.NoError(t, err)
	m := openModel(t, dir, k3.WithTrunkBudget(p.Trunk.Floor), k3.WithCacheBudget(0))
	fp := m.Plan().Trunk
	require.Equal(t, 1, fp.Slots)
	require.False(t, fp.HeadPinned || fp.EmbedPinned || len(fp.Pinned) > 0)
	got := runModel(t, m, ref)
	assert.Equal(t, want, got, "floor logits and tokens must equal the mapped run's")
	st, cs := m.Stats().Trunk, m.Stats().Cache
	t.Logf("floor %d B: trunk %d B + head %d B streamed, %d embedding B; experts %d B read; ids %v",
		p.Trunk.Floor, st.BytesRead, st.HeadBytes, st.EmbedBytes, cs.Run.BytesRead, got.ids)
}

// TestPerfVerifyPassCost logs what one forward pass over 1, 5 and 9 new positions costs with
// mapped weights and at the memory floor: the price of verifying speculative drafts (README,
// Generation). It needs K3_PERF_DIR like TestPerfFloorBitIdentical.
func TestPerfVerifyPassCost(t *testing.T) {
	dir := testkit.PerfDir(t, checkpoint.Synthesize)
	p, err := k3.PlanFor(dir, k3.WithTrunkBudget(1<<50))
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		opts []k3.Option
	}{{"mapped", nil}, {"floor", []k3.Option{k3.WithTrunkBudget(p.Trunk.Floor), k3.WithCacheBudget(0)}}} {
		m := openModel(t, dir, c.opts...)
		for _, n := range []int{1, 5, 9} {
			var best time.Duration
			for range 2 {
				s := m.NewSession()
				require.NoError(t, s.Prefill(t.Context(), []int{11, 2048, 7, 31000, 5}))
				ids := make([]int, n)
				for i := range ids {
					ids[i] = 100 + i
				}
				t0 := time.Now()
				_, err := s.PrefillAll(t.Context(), ids)
				require.NoError(t, err)
				if d := time.Since(t0); best == 0 || d < best {
					best = d
				}
			}
			t.Logf("%s: one pass over %d positions: %.3f s", c.name, n, best.Seconds())
		}
		m.Close()
	}
}
