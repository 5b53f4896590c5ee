package k3_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/tokenizer"
)

// TestDefaultStop: the tokenizer's [EOS] then <|end_of_msg|>, then the
// config's eos ids, each once; ids outside the vocabulary are dropped.
func TestDefaultStop(t *testing.T) {
	tokens := make([][]byte, 256)
	for i := range tokens {
		tokens[i] = []byte{byte(i)}
	}
	ranks, err := tokenizer.NewRanks(tokens)
	require.NoError(t, err)
	enc, err := tokenizer.New(tokenizer.Spec{Ranks: ranks, Split: tokenizer.SplitCL100K,
		Specials: map[string]int{"[BOS]": 300, "[EOS]": 302, "<|end_of_msg|>": 301}})
	require.NoError(t, err)

	c := &config.Config{Vocab: 400, EOSTokenIDs: []int{301, 7, 7}}
	stop, dropped := k3.DefaultStop(enc, c)
	assert.Equal(t, []int{302, 301, 7}, stop)
	assert.Empty(t, dropped)

	c.Vocab = 302
	stop, dropped = k3.DefaultStop(enc, c)
	assert.Equal(t, []int{301, 7}, stop)
	assert.Equal(t, []int{302}, dropped)

	stop, dropped = k3.DefaultStop(nil, c)
	assert.Equal(t, []int{301, 7}, stop, "without a tokenizer, the config's eos alone")
	assert.Empty(t, dropped)

	stop, _ = k3.DefaultStop(nil, &config.Config{Vocab: 10})
	assert.Empty(t, stop)
}
