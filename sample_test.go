package k3_test

import (
	"context"
	"math"
	"math/bits"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sample"
)

// refRNG is xoshiro256** seeded by SplitMix64, written here from the published description
// independently of the library's code.
type refRNG struct{ s0, s1, s2, s3 uint64 }

func newRefRNG(seed uint64) *refRNG {
	sm := seed
	split := func() uint64 {
		sm += 0x9E3779B97F4A7C15
		z := sm
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		return z ^ z>>31
	}
	return &refRNG{split(), split(), split(), split()}
}

func (r *refRNG) uniform() float64 {
	out := bits.RotateLeft64(r.s1*5, 7) * 9
	t := r.s1 << 17
	r.s2 ^= r.s0
	r.s3 ^= r.s1
	r.s1 ^= r.s2
	r.s0 ^= r.s3
	r.s2 ^= t
	r.s3 = bits.RotateLeft64(r.s3, 45)
	return float64(out>>11) / (1 << 53)
}

// refSample is a plain transcription of the documented sampler stages (SamplerOptions).
func refSample(logits []float32, hist []int, o sample.Options, r *refRNG) int {
	l := make([]float64, len(logits))
	for i, v := range logits {
		l[i] = float64(v)
	}
	win := hist
	if o.PenaltyWindow > 0 && len(win) > o.PenaltyWindow {
		win = win[len(win)-o.PenaltyWindow:]
	}
	count := map[int]int{}
	for _, id := range win {
		count[id]++
	}
	for id, c := range count {
		if o.RepeatPenalty > 1 {
			if l[id] > 0 {
				l[id] /= o.RepeatPenalty
			} else {
				l[id] *= o.RepeatPenalty
			}
		}
		l[id] -= float64(c) * o.FrequencyPenalty
		l[id] -= o.PresencePenalty
	}
	if o.Temperature == 0 {
		best := 0
		for i := range l {
			if l[i] > l[best] {
				best = i
			}
		}
		return best
	}
	ids := make([]int, len(l))
	for i := range ids {
		ids[i] = i
	}
	z := func(i int) float64 { return l[i] / o.Temperature }
	sort.SliceStable(ids, func(a, b int) bool { return z(ids[a]) > z(ids[b]) })
	if o.TopK > 0 && o.TopK < len(ids) {
		ids = ids[:o.TopK]
	}
	e := make([]float64, len(ids))
	total := 0.0
	for j, id := range ids {
		e[j] = math.Exp(z(id) - z(ids[0]))
		total += e[j]
	}
	keep := len(ids)
	if o.TopP > 0 && o.TopP < 1 {
		run := 0.0
		for j := range ids {
			run += e[j]
			if run/total >= o.TopP {
				keep = j + 1
				break
			}
		}
	}
	if o.MinP > 0 {
		for j := 1; j < keep; j++ {
			if e[j] < o.MinP*e[0] {
				keep = j
				break
			}
		}
	}
	kept := 0.0
	for j := range keep {
		kept += e[j]
	}
	target, run := r.uniform()*kept, 0.0
	for j := range keep {
		run += e[j]
		if target < run {
			return ids[j]
		}
	}
	return ids[keep-1]
}

var samplerCases = map[string]sample.Options{
	"temperature":   {Temperature: 1, Seed: 7},
	"top-k":         {Temperature: 0.8, TopK: 20, Seed: 42},
	"top-p":         {Temperature: 1.2, TopP: 0.7, Seed: 3},
	"min-p":         {Temperature: 2, MinP: 0.3, Seed: 11},
	"penalties":     {Temperature: 0.9, RepeatPenalty: 1.5, FrequencyPenalty: 0.1, PresencePenalty: 0.05, PenaltyWindow: 8, Seed: 5},
	"greedy+repeat": {RepeatPenalty: 2, PenaltyWindow: 6},
}

func generateIDs(t *testing.T, m *k3.Model, prompt []int, n int, o k3.GenerateOptions) []int {
	t.Helper()
	o.MaxTokens = n
	var out []int
	for id, err := range m.Generate(context.Background(), prompt, o) {
		require.NoError(t, err)
		out = append(out, id)
	}
	return out
}

// TestSamplerMatchesReference: on models/tiny, every sampler configuration yields the id
// sequence the independent reference computes from the same logits, for 1 and 2 threads.
func TestSamplerMatchesReference(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	const n = 24
	for name, o := range samplerCases {
		t.Run(name, func(t *testing.T) {
			var got [2][]int
			for th := 1; th <= 2; th++ {
				m := openModel(t, dir, k3.WithThreads(th))
				sm, err := sample.New(o)
				require.NoError(t, err)
				got[th-1] = generateIDs(t, m, ref.PromptIDs, n, k3.GenerateOptions{Sampler: sm})
			}
			assert.Equal(t, got[0], got[1], "threads 1 vs 2")

			m := openModel(t, dir, k3.WithThreads(1))
			s := m.NewSession()
			ctx := context.Background()
			require.NoError(t, s.Prefill(ctx, ref.PromptIDs))
			r := newRefRNG(o.Seed)
			var want []int
			for range n {
				id := refSample(s.Logits(), s.IDs(), o, r)
				want = append(want, id)
				require.NoError(t, s.Step(ctx, id))
			}
			assert.Equal(t, want, got[0])
			if o.Temperature > 0 {
				greedy := generateIDs(t, m, ref.PromptIDs, n, k3.GenerateOptions{})
				assert.NotEqual(t, greedy, got[0], "sampling should leave the greedy path")
			}
		})
	}
}

// TestSamplerSeeds: different seeds give different streams; the same seed the same stream;
// full recompute and incremental modes agree.
func TestSamplerSeeds(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	run := func(seed uint64, full bool) []int {
		sm, err := sample.New(sample.Options{Temperature: 1, Seed: seed})
		require.NoError(t, err)
		return generateIDs(t, m, ref.PromptIDs, 16, k3.GenerateOptions{Sampler: sm, FullRecompute: full})
	}
	a := run(1, false)
	assert.Equal(t, a, run(1, false))
	assert.Equal(t, a, run(1, true))
	assert.NotEqual(t, a, run(2, false))
}
