package k3_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodeStepAllocatesNothing: a decode step at a fixed context length (each run restores the
// same snapshot, as BenchmarkFloor does) allocates nothing on one thread — mapped, under a trunk
// budget and with the expert cache — and nothing on two threads where every mat-vec is too small
// to split (the fixture models). What a growing context adds is amortized: the MLA cache and the
// id list grow by doubling. On two threads a split mat-vec allocates nothing either (the pool's
// job, a recycled task and row ranges without views), nor do the splits of heads, channels and
// experts (tasks kept in the workspaces); an expert-cache miss builds its views.
// TestDecodeStepAllocatesNothingPerf checks the splits where they happen, at the perf geometry.
func TestDecodeStepAllocatesNothing(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	for _, dir := range testkit.Models(t) {
		for _, c := range []struct {
			name    string
			threads int
			opts    []k3.Option
		}{
			{"mapped", 1, nil},
			{"mapped-2-threads", 2, nil},
			{"trunk-pinned", 1, []k3.Option{k3.WithTrunkBudget(1 << 30)}},
			{"cache", 1, []k3.Option{k3.WithCacheBudget(1 << 30)}},
		} {
			t.Run(fmt.Sprintf("%s/%s", filepath.Base(dir), c.name), func(t *testing.T) {
				m := openModel(t, dir, append(c.opts, k3.WithThreads(c.threads))...)
				assert.Zero(t, stepAllocs(t, m, []int{1, 2, 3}, 20), "allocations per decode step")
			})
		}
	}
}

// TestDecodeStepAllocatesNothingPerf is TestDecodeStepAllocatesNothing on the synthetic perf
// checkpoint, whose layers are wide enough for every split to run on 2 threads (the fixture
// models run them inline). It needs K3_PERF_DIR (the perf checkpoint, synthesized there on
// first use) and skips without it.
func TestDecodeStepAllocatesNothingPerf(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	dir := perfDir(t)
	for _, threads := range []int{1, 2} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			m := openModel(t, dir, k3.WithThreads(threads))
			assert.Zero(t, stepAllocs(t, m, []int{1, 100, 2000}, 10), "allocations per decode step")
		})
	}
}

// stepAllocs prefills prompt, takes one step (buffers reach their decode size, experts are
// cached) and returns the allocations of a step at that same context length, each run
// restoring the snapshot taken after the prompt, as BenchmarkFloor does.
func stepAllocs(t *testing.T, m *k3.Model, prompt []int, runs int) float64 {
	t.Helper()
	s, snap := prefilled(t, m, prompt)
	ctx := context.Background()
	require.NoError(t, s.Step(ctx, 4))
	// Open and the prompt leave garbage whose collection would empty the sync.Pool that recycles
	// the split mat-vecs' tasks mid-measurement; a decode loop that allocates nothing never
	// starts a collection of its own.
	runtime.GC()
	return testing.AllocsPerRun(runs, func() {
		if err := s.Restore(snap); err != nil {
			t.Fatal(err)
		}
		if err := s.Step(ctx, 4); err != nil {
			t.Fatal(err)
		}
	})
}
