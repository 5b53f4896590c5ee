package k3_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/k3-project/k3"
)

// sharedRun is one measurement of n concurrent sessions.
type sharedRun struct {
	n          int
	tokens     int
	wall       float64 // seconds for all sessions' steps
	bytes      int64   // weight bytes read from storage (trunk and expert cache), -1 when mapped
	walks      int64
	rowsInWalk int64
	// unionPerLayer is the distinct routed experts a walk fetched per MoE layer (the expert
	// store's requests over walks and MoE layers), 0 when mapped (no store counts them).
	unionPerLayer float64
}

func (r sharedRun) tokensPerSecond() float64 { return float64(r.tokens) / r.wall }

// measureShared prefills n sessions with different prompts, one after the other, then times
// steps greedy steps of each, all sessions stepping from their own goroutines, after one
// untimed step of each. With profile set it writes a CPU profile of the timed steps there.
func measureShared(b *testing.B, m *k3.Model, n, steps int, profile string) sharedRun {
	b.Helper()
	ctx := context.Background()
	ss := prefilledSessions(b, m, sharedPrompts(n, m.Config().Vocab))
	errs := make([]error, n)
	// decode runs k greedy steps of every session, each from its own goroutine.
	decode := func(k int) {
		var wg sync.WaitGroup
		for i, s := range ss {
			wg.Go(func() {
				for range k {
					if _, err := greedyStep(ctx, s); err != nil {
						errs[i] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	// One untimed step each first: the goroutines start one after another, so the first walk
	// carries the first session alone and the rest wait for the second. What is timed is the
	// steady state of n sessions decoding together.
	decode(1)
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	before := m.Stats()
	t0 := time.Now()
	decode(steps)
	wall := time.Since(t0).Seconds()
	after := m.Stats()
	// Every step's token came from Session.Next, so Stats.Tokens counts them.
	r := sharedRun{n: n, tokens: int(after.Tokens - before.Tokens), wall: wall, bytes: -1,
		walks: after.Walks - before.Walks, rowsInWalk: after.WalkRows - before.WalkRows}
	if r.tokens != n*steps {
		b.Fatalf("%d sessions × %d steps counted as %d generated tokens", n, steps, r.tokens)
	}
	if after.Trunk != nil {
		r.bytes = after.Trunk.TotalBytes() - before.Trunk.TotalBytes()
		if after.Cache != nil {
			r.bytes += after.Cache.Run.BytesRead - before.Cache.Run.BytesRead
		}
	}
	if after.Cache != nil && r.walks > 0 {
		c := m.Config()
		// A walk asks the store once per MoE layer for the union of its rows' picks.
		r.unionPerLayer = float64(after.Cache.Run.Requests-before.Cache.Run.Requests) /
			float64(r.walks) / float64(c.NumLayers-c.FirstDense)
	}
	return r
}

// warmShared prefills one throw-away session of m with warmLen distinct ids, so that the routed
// experts have been touched before anything is timed. Without it the one-session run, the first
// to route to most experts, paid the first touch of their mapped pages (a perf token 84 ms in the
// two-session run against 112 alone: two sessions looked 2.67× as fast as one) and the speedups
// of the runs after it were inflated by that. Were routing spread evenly, 8 picks of 64 experts a
// token would miss a given expert in all warmLen tokens of a layer with probability
// (56/64)^warmLen ≈ 2·10⁻⁴.
func warmShared(b *testing.B, m *k3.Model) {
	b.Helper()
	const warmLen = 64
	ids := make([]int, warmLen)
	for i := range ids {
		ids[i] = (i*7919 + 11) % m.Config().Vocab
	}
	if err := m.NewSession().Prefill(context.Background(), ids); err != nil {
		b.Fatal(err)
	}
}

// sharedTable prints the runs of one configuration and returns the aggregate speedup of the
// last run (the most sessions) over the first (one).
func sharedTable(name string, runs []sharedRun) float64 {
	fmt.Printf("%s:\n  sessions  aggregate tokens/s  speedup  bytes read per generated token  per-session s/token  rows/walk  experts/MoE layer\n", name)
	for _, r := range runs {
		bpt, union := "n/a (mapped)", "n/a"
		if r.bytes >= 0 {
			bpt = fmt.Sprintf("%.4g", float64(r.bytes)/float64(r.tokens))
		}
		if r.unionPerLayer > 0 {
			union = fmt.Sprintf("%.1f", r.unionPerLayer)
		}
		fmt.Printf("  %8d  %18.2f  %6.2f×  %30s  %19.3f  %9.2f  %17s\n", r.n, r.tokensPerSecond(),
			r.tokensPerSecond()/runs[0].tokensPerSecond(), bpt, r.wall/float64(r.tokens/r.n),
			float64(r.rowsInWalk)/float64(max(1, r.walks)), union)
	}
	return runs[len(runs)-1].tokensPerSecond() / runs[0].tokensPerSecond()
}

// BenchmarkShared measures, in one run on the synthetic perf checkpoint, what shared walks
// (§4.11) give concurrent sessions: for 1, 2, 4 and 8 sessions with different prompts stepping
// from their own goroutines, at the trunk's floor budget with expert cache 0 and with mapped
// weights, the aggregate tokens/s, the bytes read per generated token (trunk and expert reads
// over the tokens Stats.Tokens counted), the per-session s/token, the rows per walk and, where
// an expert store reads them, the distinct routed experts a walk fetches per MoE layer. Each
// configuration's model is warmed first (warmShared), so that no run pays the first touch of
// weights a run before it did not:
//
//	K3_PERF_DIR=<dir> go test -run '^$' -bench Shared -benchtime 1x .
//
// With K3_SHARED_PROFILE=<file> it also writes CPU profiles of the timed steps of eight
// sessions, at the floor to <file> and mapped to <file>.mapped (go tool pprof <file>), and of
// one session to <file>.one and <file>.mapped.one: a kernel's samples over the tokens of each
// run give its CPU time per generated token alone and shared.
//
// The last line reads SHARED floor_8x=<aggregate speedup of 8 sessions over 1 at the floor>
// mapped_8x=<the same, mapped>. The checkpoint is synthesized into K3_PERF_DIR on first use.
func BenchmarkShared(b *testing.B) {
	dir := perfDir(b)
	benchShared(b, dir, 8)
}

// benchShared runs BenchmarkShared's table on dir with steps decode steps per session.
func benchShared(b *testing.B, dir string, steps int) {
	p, err := k3.PlanFor(dir, k3.WithTrunkBudget(1<<40))
	if err != nil {
		b.Fatal(err)
	}
	configs := []struct {
		name string
		opts []k3.Option
	}{
		{"floor (trunk at its floor, expert cache 0)", []k3.Option{k3.WithTrunkBudget(p.Trunk.Floor), k3.WithCacheBudget(0)}},
		{"mapped", nil},
	}
	for b.Loop() {
		var speedup [2]float64
		for i, c := range configs {
			m, err := k3.Open(dir, append(c.opts, k3.WithThreads(2))...)
			if err != nil {
				b.Fatal(err)
			}
			warmShared(b, m)
			var runs []sharedRun
			for _, n := range []int{1, 2, 4, 8} {
				var profile string
				if base := os.Getenv("K3_SHARED_PROFILE"); base != "" && (n == 1 || n == 8) {
					profile = base + []string{"", ".mapped"}[i] + map[int]string{1: ".one", 8: ""}[n]
				}
				runs = append(runs, measureShared(b, m, n, steps, profile))
			}
			m.Close()
			speedup[i] = sharedTable(c.name, runs)
		}
		fmt.Printf("SHARED floor_8x=%.2f mapped_8x=%.2f\n", speedup[0], speedup[1])
		b.ReportMetric(speedup[0], "floor_8x")
		b.ReportMetric(speedup[1], "mapped_8x")
	}
}
