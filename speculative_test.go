package k3_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sample"
)

// specRun generates with o and records the ids, the bits of the logits each pick was made
// from, and the result.
func specRun(t testing.TB, m *k3.Model, prompt []int, o k3.GenerateOptions) ([]int, [][]uint32, k3.GenerateResult) {
	t.Helper()
	var ids []int
	var rows [][]uint32
	var res k3.GenerateResult
	o.OnLogits = func(step int, l []float32) {
		require.Equal(t, len(rows), step, "OnLogits steps in order")
		rows = append(rows, f32bits(l))
	}
	o.OnDone = func(r k3.GenerateResult) { res = r }
	for id, err := range m.Generate(context.Background(), prompt, o) {
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids, rows, res
}

// repetitive makes a prompt in which prompt lookup finds drafts: the reference prompt three
// times.
func repetitive(p []int) []int {
	return append(append(append([]int(nil), p...), p...), p...)
}

// lookupPrompt returns a prompt in which id a is followed once by every id of the vocabulary
// and ends with a, so whatever the first pick t0 is, the pair (a, t0) occurred before and
// prompt lookup drafts at the first step.
func lookupPrompt(m *k3.Model, a int) []int {
	v := m.Config().Vocab
	var p []int
	for y := range v {
		p = append(p, a, y, (y*7+3)%v)
	}
	return append(p, a)
}

// TestSpeculativeGreedyEqualsPlain: for k = 1..8 on every fixture model, speculative greedy
// decoding with prompt lookup yields the plain greedy ids, each picked from bit-identical
// logits, on a repetitive and a non-repetitive prompt and on one where the lookup drafts.
// (TestSpeculativeOracleDrafts forces accepted and rejected drafts of every shape.)
func TestSpeculativeGreedyEqualsPlain(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		m := openModel(t, dir)
		for _, prompt := range [][]int{ref.PromptIDs, repetitive(ref.PromptIDs)} {
			const n = 24
			want, wantRows, _ := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: n})
			for k := 1; k <= 8; k++ {
				got, gotRows, res := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: n, Speculative: k})
				require.Equal(t, want, got, "k=%d", k)
				require.Equal(t, wantRows, gotRows, "k=%d: logits", k)
				assert.Equal(t, k3.StopMaxTokens, res.Reason)
			}
		}

		// The lookup prompt is long: prefill it once and restore it for every k.
		ctx := context.Background()
		s, snap := prefilled(t, m, lookupPrompt(m, ref.PromptIDs[0]))
		gen := func(k int) ([]int, [][]uint32, k3.GenerateResult) {
			require.NoError(t, s.Restore(snap))
			var ids []int
			var rows [][]uint32
			var res k3.GenerateResult
			o := k3.GenerateOptions{MaxTokens: 8, Speculative: k, OnDone: func(r k3.GenerateResult) { res = r },
				OnLogits: func(_ int, l []float32) { rows = append(rows, f32bits(l)) }}
			for id, err := range s.Generate(ctx, o) {
				require.NoError(t, err)
				ids = append(ids, id)
			}
			return ids, rows, res
		}
		want, wantRows, _ := gen(0)
		for _, k := range []int{1, 3, 8} {
			got, gotRows, res := gen(k)
			require.Equal(t, want, got, "lookup prompt, k=%d", k)
			require.Equal(t, wantRows, gotRows, "lookup prompt, k=%d: logits", k)
			assert.Positive(t, res.Verifies, "lookup prompt, k=%d: the lookup never drafted", k)
		}
	})
}

// TestSpeculativeSessionState: after speculative generation ends on a stop id, a stop string,
// MaxTokens or MaxContext, the session holds exactly what plain generation leaves (every
// yielded token but the last), bit for bit.
func TestSpeculativeSessionState(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	ctx := context.Background()
	prompt := repetitive(ref.PromptIDs)
	plain, _, _ := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: 20})
	full := decodeFake(plain)
	for name, o := range map[string]k3.GenerateOptions{
		"max tokens":  {MaxTokens: 17},
		"stop id":     {MaxTokens: 20, Stop: []int{plain[9]}},
		"stop string": {MaxTokens: 20, Tokens: fakeTokens{}, StopStrings: []string{string(full[3*11+1 : 3*12+2])}},
		"context":     {MaxTokens: 20, MaxContext: len(prompt) + 13},
	} {
		t.Run(name, func(t *testing.T) {
			run := func(k int) (*k3.Session, []int, k3.GenerateResult) {
				s := m.NewSession()
				require.NoError(t, s.Prefill(ctx, prompt))
				o := o
				o.Speculative = k
				var res k3.GenerateResult
				o.OnDone = func(r k3.GenerateResult) { res = r }
				var ids []int
				for id, err := range s.Generate(ctx, o) {
					require.NoError(t, err)
					ids = append(ids, id)
				}
				return s, ids, res
			}
			ps, pids, pres := run(0)
			for k := 1; k <= 8; k++ {
				ss, sids, sres := run(k)
				require.Equal(t, pids, sids, "k=%d", k)
				require.Equal(t, pres.Reason, sres.Reason, "k=%d", k)
				require.Equal(t, ps.IDs(), ss.IDs(), "k=%d: session ids", k)
				require.Equal(t, f32bits(ps.Logits()), f32bits(ss.Logits()), "k=%d: session logits", k)
				// The states match too: the next step gives the same logits.
				next := pids[len(pids)-1]
				require.NoError(t, ps.Step(ctx, next))
				require.NoError(t, ss.Step(ctx, next))
				require.Equal(t, f32bits(ps.Logits()), f32bits(ss.Logits()), "k=%d: after one more step", k)
				ps, _, _ = run(0)
			}
		})
	}
}

// TestSpeculativeSampling: with a sampler, speculative decoding is deterministic for a seed and
// k.
func TestSpeculativeSampling(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	prompt := repetitive(ref.PromptIDs)
	run := func(k int) ([]int, k3.GenerateResult) {
		sm, err := sample.New(sample.Options{Temperature: 0.3, Seed: 17})
		require.NoError(t, err)
		ids, _, res := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: 32, Sampler: sm, Speculative: k})
		return ids, res
	}
	a, res := run(4)
	b, _ := run(4)
	assert.Equal(t, a, b)
	assert.Len(t, a, 32)
	t.Logf("drafted %d accepted %d in %d verification passes", res.Drafted, res.Accepted, res.Verifies)
}

// perfPrompts: "repetitive" quotes a block of ids back (as code or a document quoted in a reply
// would); "plain" never repeats an id pair.
func perfPrompts() map[string][]int {
	block := []int{1, 100, 2000, 30000, 5, 77, 123, 4567, 8, 9, 10, 11, 12, 13, 14, 15, 901, 902, 903, 904}
	var rep []int
	for range 3 {
		rep = append(rep, block...)
	}
	plain := make([]int, 60)
	for i := range plain {
		plain[i] = (i*7919 + 13) % 32768
	}
	return map[string][]int{"repetitive": rep, "plain": plain}
}

// TestSpeculativePerf: speculative greedy equals plain greedy on perf for k = 1..8.
func TestSpeculativePerf(t *testing.T) {
	dir := testkit.PerfDir(t, checkpoint.Synthesize)
	m := openModel(t, dir)
	for name, prompt := range perfPrompts() {
		want, _, _ := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: 12})
		for k := 1; k <= 8; k++ {
			got, _, res := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: 12, Speculative: k})
			require.Equal(t, want, got, "%s k=%d", name, k)
			t.Logf("%s k=%d: drafted %d accepted %d passes %d", name, k, res.Drafted, res.Accepted, res.Verifies)
		}
	}
}

// BenchmarkSpeculativePerf: greedy generation of 24 tokens on perf, plain (k=0) and with
// prompt-lookup drafts of k ids, on a repetitive and a non-repetitive prompt. Compare the
// s/op of k>0 with k=0 of the same prompt (benchstat).
func BenchmarkSpeculativePerf(b *testing.B) {
	dir := testkit.PerfDir(b, checkpoint.Synthesize)
	m := openModel(b, dir)
	ctx := context.Background()
	for _, name := range []string{"repetitive", "plain"} {
		s, snap := prefilled(b, m, perfPrompts()[name])
		for _, k := range []int{0, 4} {
			b.Run(name+"/k="+strconv.Itoa(k), func(b *testing.B) {
				var res k3.GenerateResult
				for b.Loop() {
					if err := s.Restore(snap); err != nil {
						b.Fatal(err)
					}
					o := k3.GenerateOptions{MaxTokens: 24, Speculative: k, OnDone: func(r k3.GenerateResult) { res = r }}
					for _, err := range s.Generate(ctx, o) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/24, "s/token")
				if res.Drafted > 0 {
					b.ReportMetric(float64(res.Accepted)/float64(res.Drafted), "accept")
				}
			})
		}
	}
}

// BenchmarkSecondTurnPerf: the second turn of a conversation on perf — 8 new ids and 8
// generated tokens after a 96-id first turn — from a loaded state file versus recomputing the
// whole history (the "scratch" case prefills the first turn again).
func BenchmarkSecondTurnPerf(b *testing.B) {
	dir := testkit.PerfDir(b, checkpoint.Synthesize)
	m := openModel(b, dir)
	ctx := context.Background()
	turn1 := make([]int, 96)
	for i := range turn1 {
		turn1[i] = (i*104729 + 7) % 32768
	}
	turn2 := []int{11, 22, 33, 44, 55, 66, 77, 88}
	s := m.NewSession()
	if err := s.Prefill(ctx, turn1); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "turn1.k3st")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Save(f, nil); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	second := func(b *testing.B, s *k3.Session) {
		if err := s.Prefill(ctx, turn2); err != nil {
			b.Fatal(err)
		}
		for _, err := range s.Generate(ctx, k3.GenerateOptions{MaxTokens: 8}) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("scratch", func(b *testing.B) {
		for b.Loop() {
			s := m.NewSession()
			if err := s.Prefill(ctx, turn1); err != nil {
				b.Fatal(err)
			}
			second(b, s)
		}
	})
	b.Run("loaded", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			s, _, err := k3.LoadSession(m, f)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			second(b, s)
		}
	})
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

// BenchmarkVerifyPassPerf: the cost of one batched pass over T new positions with every
// position's logits (a verification of T−1 drafts), against T = 1 (a plain decode step), after
// a 16-id prompt on perf. Speculation pays when accepted drafts per pass exceed
// cost(T)/cost(1) − 1.
func BenchmarkVerifyPassPerf(b *testing.B) {
	dir := testkit.PerfDir(b, checkpoint.Synthesize)
	m := openModel(b, dir)
	ctx := context.Background()
	s, snap := prefilled(b, m, perfPrompts()["repetitive"][:16])
	for _, T := range []int{1, 2, 3, 5, 9} {
		ids := make([]int, T)
		for i := range ids {
			ids[i] = 1000 + 37*i
		}
		b.Run("T="+strconv.Itoa(T), func(b *testing.B) {
			for b.Loop() {
				if err := s.Restore(snap); err != nil {
					b.Fatal(err)
				}
				if _, err := s.PrefillAll(ctx, ids); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/pass")
		})
	}
}
