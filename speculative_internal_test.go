package k3

import (
	"context"
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sample"
)

type genTrace struct {
	ids  []int
	rows [][]uint32
	res  GenerateResult
}

func trace(t *testing.T, m *Model, prompt []int, o GenerateOptions) genTrace {
	t.Helper()
	var tr genTrace
	o.OnLogits = func(step int, l []float32) {
		row := make([]uint32, len(l))
		for i, v := range l {
			row[i] = math.Float32bits(v)
		}
		tr.rows = append(tr.rows, row)
	}
	o.OnDone = func(r GenerateResult) { tr.res = r }
	for id, err := range m.Generate(context.Background(), prompt, o) {
		require.NoError(t, err)
		tr.ids = append(tr.ids, id)
	}
	return tr
}

// openInternal opens dir, failing the test on an error; the model is closed when the test ends.
func openInternal(tb testing.TB, dir string) *Model {
	tb.Helper()
	m, err := Open(dir)
	require.NoError(tb, err, "open %s", dir)
	tb.Cleanup(func() { m.Close() })
	return m
}

// TestSpeculativeOracleDrafts drafts the known greedy continuation with deliberate errors at
// varying places, so that drafts are accepted in full, in part and not at all, and checks that
// the ids, the logits of every pick and the final session equal plain greedy decoding, on every
// fixture model for k = 1..8.
func TestSpeculativeOracleDrafts(t *testing.T) {
	ctx := context.Background()
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m := openInternal(t, dir)
			prompt := testkit.LoadReference(t, dir).PromptIDs
			const n = 24
			plain := trace(t, m, prompt, GenerateOptions{MaxTokens: n})
			V := m.cfg.Vocab
			for k := 1; k <= 8; k++ {
				// A wrong id somewhere in every third draft.
				drafter := oracleDrafter(prompt, plain.ids, V, func(j, n int) int {
					if j%3 == 1 && n > 0 {
						return (j / 3) % n
					}
					return -1
				})
				got := trace(t, m, prompt, GenerateOptions{MaxTokens: n, Speculative: k, drafter: drafter})
				require.Equal(t, plain.ids, got.ids, "k=%d", k)
				require.Equal(t, plain.rows, got.rows, "k=%d: logits of each pick", k)
				assert.Positive(t, got.res.Accepted, "k=%d", k)
				assert.Less(t, got.res.Accepted, got.res.Drafted, "k=%d", k)

				s := m.NewSession()
				require.NoError(t, s.Prefill(ctx, prompt))
				var ids []int
				for id, err := range s.Generate(ctx, GenerateOptions{MaxTokens: n, Speculative: k, drafter: drafter}) {
					require.NoError(t, err)
					ids = append(ids, id)
				}
				require.Equal(t, plain.ids, ids)
				whole := m.NewSession()
				require.NoError(t, whole.Prefill(ctx, append(append([]int(nil), prompt...), ids[:n-1]...)))
				require.Equal(t, whole.IDs(), s.IDs())
				require.Equal(t, whole.logits, s.logits, "k=%d: session after generation", k)
			}
		})
	}
}

// TestSpeculativeSamplingOracle: with a sampler and drafts that are often right, the output is
// deterministic and both acceptances and rejections occur.
func TestSpeculativeSamplingOracle(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	m := openInternal(t, dir)
	prompt := testkit.LoadReference(t, dir).PromptIDs
	plain := trace(t, m, prompt, GenerateOptions{MaxTokens: 16})
	run := func() genTrace {
		sm, err := sample.New(sample.Options{Temperature: 0.001, Seed: 4})
		require.NoError(t, err)
		drafter := oracleDrafter(prompt, plain.ids, m.cfg.Vocab, func(j, n int) int { return -1 })
		return trace(t, m, prompt, GenerateOptions{MaxTokens: 16, Speculative: 4, Sampler: sm, drafter: drafter})
	}
	a, b := run(), run()
	assert.Equal(t, a.ids, b.ids)
	assert.Positive(t, a.res.Accepted)
}

func TestLookupDraft(t *testing.T) {
	h := []int{1, 2, 3, 4, 5, 9, 2, 3, 4, 7, 8, 3, 4}
	// Suffix 3-gram (8,3,4) does not recur; the 2-gram (3,4) last occurred at index 7.
	assert.Equal(t, []int{7, 8, 3}, lookupDraft(h, 3))
	assert.Equal(t, []int{7, 8, 3, 4}, lookupDraft(h, 10))
	assert.Nil(t, lookupDraft([]int{1, 2, 3}, 4))
	// A 3-gram match is preferred to a more recent 2-gram one.
	h = []int{5, 6, 7, 1, 9, 6, 7, 2, 5, 6, 7}
	assert.Equal(t, []int{1, 9}, lookupDraft(h, 2))
}

// oracleDrafter drafts the known continuation want of prompt; wrong(j, n) is the index of the
// id to replace in the n-id draft starting after j emitted tokens (−1: none).
func oracleDrafter(prompt, want []int, vocab int, wrong func(j, n int) int) func([]int, int) []int {
	return func(hist []int, lim int) []int {
		j := len(hist) - len(prompt)
		if j >= len(want) {
			return nil
		}
		d := append([]int(nil), want[j:min(len(want), j+lim)]...)
		if w := wrong(j, len(d)); w >= 0 {
			d[w] = (d[w] + 1) % vocab
		}
		return d
	}
}

// TestSpeculativeOraclePerf: on perf, for k = 1..8, speculative greedy with drafts that are
// right, wrong at the first id, or alternately so, yields the plain greedy ids.
func TestSpeculativeOraclePerf(t *testing.T) {
	dir := testkit.PerfDir(t, checkpoint.Synthesize)
	m := openInternal(t, dir)
	prompt := []int{1, 100, 2000, 30000, 5, 77, 123, 4567}
	const n = 10
	plain := trace(t, m, prompt, GenerateOptions{MaxTokens: n})
	for k := 1; k <= 8; k++ {
		d := oracleDrafter(prompt, plain.ids, m.cfg.Vocab, func(j, n int) int {
			if (j+k)%3 == 0 {
				return (j + k) % n
			}
			return -1
		})
		got := trace(t, m, prompt, GenerateOptions{MaxTokens: n, Speculative: k, drafter: d})
		require.Equal(t, plain.ids, got.ids, "k=%d", k)
		require.Equal(t, plain.rows, got.rows, "k=%d", k)
		t.Logf("k=%d: %d passes, drafted %d, accepted %d", k, got.res.Verifies, got.res.Drafted, got.res.Accepted)
	}
}

// BenchmarkSpeculativeOraclePerf measures the verification mechanism on perf with drafts of
// known quality, since a random-weight model never quotes its context (prompt lookup finds no
// drafts there): "right" drafts are what copying text gives (a document quoted back, code
// edited in place), "half" drafts go wrong in the middle, "wrong" ones are the worst case
// (every draft rejected at its first id; the backoff then pauses drafting).
// Each op generates 16 tokens after an 8-id prompt, plainly and speculatively.
func BenchmarkSpeculativeOraclePerf(b *testing.B) {
	dir := testkit.PerfDir(b, checkpoint.Synthesize)
	m := openInternal(b, dir)
	ctx := context.Background()
	prompt := []int{1, 100, 2000, 30000, 5, 77, 123, 4567}
	const n = 16
	var want []int
	for id, err := range m.Generate(ctx, prompt, GenerateOptions{MaxTokens: n}) {
		if err != nil {
			b.Fatal(err)
		}
		want = append(want, id)
	}
	s := m.NewSession()
	if err := s.Prefill(ctx, prompt); err != nil {
		b.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	gen := func(b *testing.B, k int, wrong func(j, n int) int) (time.Duration, GenerateResult) {
		if err := s.Restore(snap); err != nil {
			b.Fatal(err)
		}
		var res GenerateResult
		o := GenerateOptions{MaxTokens: n, Speculative: k, OnDone: func(r GenerateResult) { res = r }}
		if k > 0 {
			o.drafter = oracleDrafter(prompt, want, m.cfg.Vocab, wrong)
		}
		start := time.Now()
		i := 0
		for id, err := range s.Generate(ctx, o) {
			if err != nil || id != want[i] {
				b.Fatalf("token %d: %d, %v (want %d)", i, id, err, want[i])
			}
			i++
		}
		return time.Since(start), res
	}
	// Each iteration times plain and speculative generation back to back, so the reported
	// speedup (plain time / speculative time) is a ratio measured under the same load.
	run := func(b *testing.B, k int, wrong func(j, n int) int) {
		var plain, spec time.Duration
		var res GenerateResult
		for b.Loop() {
			p, _ := gen(b, 0, nil)
			d, r := gen(b, k, wrong)
			plain, spec, res = plain+p, spec+d, r
		}
		b.ReportMetric(plain.Seconds()/spec.Seconds(), "speedup")
		b.ReportMetric(spec.Seconds()/float64(b.N)/n, "s/token")
		b.ReportMetric(float64(res.Verifies)/n, "passes/token")
	}
	for _, k := range []int{2, 4, 8} {
		b.Run("right/k="+strconv.Itoa(k), func(b *testing.B) { run(b, k, func(j, n int) int { return -1 }) })
		b.Run("half/k="+strconv.Itoa(k), func(b *testing.B) { run(b, k, func(j, n int) int { return n / 2 }) })
		b.Run("wrong/k="+strconv.Itoa(k), func(b *testing.B) { run(b, k, func(j, n int) int { return 0 }) })
	}
}
