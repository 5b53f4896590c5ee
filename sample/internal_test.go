package sample

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAcceptRuleDistribution: the emitted token of Sampler.Accept is distributed as the
// sampler's own distribution, whatever the draft (the speculative sampling guarantee).
func TestAcceptRuleDistribution(t *testing.T) {
	logits := []float32{1, 0.5, 0, -1, 2}
	sm, err := New(Options{Temperature: 1, TopK: 4, Seed: 99})
	require.NoError(t, err)
	c, err := sm.candidates(logits, nil)
	require.NoError(t, err)
	var total float64
	for _, x := range c {
		total += x.e
	}
	want := make([]float64, len(logits))
	for _, x := range c {
		want[x.id] = x.e / total
	}
	const trials = 200000
	for _, d := range []int{4, 0, 3, 1} { // the most likely, a middle one, one outside top-k
		counts := make([]float64, len(logits))
		for range trials {
			id, _, err := sm.Accept(logits, nil, d)
			require.NoError(t, err)
			counts[id]++
		}
		for i := range counts {
			assert.InDelta(t, want[i], counts[i]/trials, 0.006, "draft %d, token %d", d, i)
		}
	}
}

// TestSplitMix64Vector pins the seeding stage to the published SplitMix64 output for seed 0.
func TestSplitMix64Vector(t *testing.T) {
	x := newXoshiro(0)
	assert.Equal(t, uint64(0xe220a8397b1dcdaf), x.s[0])
}
