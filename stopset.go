package k3

import (
	"slices"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/tokenizer"
)

// DefaultStop returns the stop set of §11.2 for a model with
// configuration c: the tokenizer's [EOS] and <|end_of_msg|> (when enc is not
// nil and defines them), then c's eos_token_id, without duplicates. The
// model ends its turns with [EOS]; config.json's eos is <|end_of_msg|>. Ids
// outside [0, c.Vocab) can never be generated; they are returned in dropped
// instead, so a caller can say so (a synthetic tokenizer for a vocabulary
// below 512 puts its specials there).
func DefaultStop(enc *tokenizer.Encoding, c *config.Config) (stop, dropped []int) {
	add := func(id int) {
		switch {
		case slices.Contains(stop, id) || slices.Contains(dropped, id):
		case id < 0 || id >= c.Vocab:
			dropped = append(dropped, id)
		default:
			stop = append(stop, id)
		}
	}
	if enc != nil {
		specials := enc.SpecialTokens()
		for _, name := range [...]string{"[EOS]", "<|end_of_msg|>"} {
			if id, ok := specials[name]; ok {
				add(id)
			}
		}
	}
	for _, id := range c.EOSTokenIDs {
		add(id)
	}
	return stop, dropped
}
