package sample_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/sample"
)

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		in   []float32
		want int
		err  error
	}{
		{[]float32{1, 3, 3, 2}, 1, nil},         // first of a tie
		{[]float32{nan, 0.5, nan, 0.7}, 3, nil}, // NaN never picked
		{[]float32{-inf, -inf}, 0, nil},         // -Inf is a value
		{[]float32{nan, -inf}, 1, nil},
		{[]float32{2, inf, nan, inf}, 1, nil},
		{[]float32{nan, nan}, 0, sample.ErrAllNaN},
		{nil, 0, sample.ErrEmpty},
		{[]float32{float32(math.Copysign(0, -1)), 0}, 0, nil}, // -0 == +0: the first wins
	}
	for _, c := range cases {
		got, err := sample.Argmax(c.in)
		if !errors.Is(err, c.err) || (err == nil && got != c.want) {
			t.Errorf("Argmax(%v) = %d, %v; want %d, %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for name, o := range map[string]sample.Options{
		"negative temperature": {Temperature: -1},
		"NaN temperature":      {Temperature: math.NaN()},
		"negative top-k":       {TopK: -1},
		"top-p above 1":        {TopP: 1.5},
		"min-p 1":              {MinP: 1},
		"repeat below 1":       {RepeatPenalty: 0.5},
		"inf frequency":        {FrequencyPenalty: math.Inf(1)},
		"negative window":      {PenaltyWindow: -2},
	} {
		_, err := sample.New(o)
		assert.ErrorIs(t, err, sample.ErrOptions, name)
	}
}

func TestEdgeLogits(t *testing.T) {
	sm, err := sample.New(sample.Options{Temperature: 1, TopK: 3})
	require.NoError(t, err)
	_, err = sm.Sample(nil, nil)
	assert.ErrorIs(t, err, sample.ErrEmpty)
	nan := float32(math.NaN())
	_, err = sm.Sample([]float32{nan, nan}, nil)
	assert.ErrorIs(t, err, sample.ErrAllNaN)
	// NaN is never picked; one finite logit is certain.
	for range 20 {
		id, err := sm.Sample([]float32{nan, -3, nan}, nil)
		require.NoError(t, err)
		assert.Equal(t, 1, id)
	}
	// A +Inf logit takes all the mass.
	id, err := sm.Sample([]float32{0, float32(math.Inf(1)), 5}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, id)
}
