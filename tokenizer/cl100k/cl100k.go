// Package cl100k is OpenAI's cl100k_base encoding, ready to use: the rank file
// is embedded in this package (so only programs that import it carry its
// 1,681,126 bytes), the split rule is tokenizer.SplitCL100K and the special tokens are
// the ones tiktoken defines for cl100k_base:
//
//	<|endoftext|> 100257
//	<|fim_prefix|> 100258
//	<|fim_middle|> 100259
//	<|fim_suffix|> 100260
//	<|endofprompt|> 100276
//
// Encoding is the equivalent of tiktoken.get_encoding("cl100k_base"). Its ids
// equal tiktoken's for both encode_ordinary (tokenizer.NoSpecial) and
// encode(text, allowed_special="all") (tokenizer.AllowSpecial).
//
// The rank data are OpenAI's, published with tiktoken under the MIT licence;
// see the NOTICE file in this directory.
package cl100k

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"github.com/k3-project/k3/tokenizer"
)

// Name is the encoding's name in tiktoken.
const Name = "cl100k_base"

// RanksSHA256 is the SHA-256 of the embedded rank file, equal to the one
// OpenAI publishes.
const RanksSHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

// NumRanks is the number of byte-pair ranks (ids 0..NumRanks-1).
const NumRanks = 100256

//go:embed cl100k_base.tiktoken
var rankFile string

// Parsed on first use and then shared: the encoding is immutable and safe
// for concurrent use, so one copy per process is enough. Only load refers to
// rankFile and nothing runs at package initialisation, so the linker drops
// the data from programs that never call Ranks or Encoding.
var (
	once     sync.Once
	ranks    *tokenizer.Ranks
	encoding *tokenizer.Encoding
	loadErr  error
)

func load() {
	ranks, loadErr = tokenizer.ReadRanks(strings.NewReader(rankFile))
	if loadErr != nil {
		loadErr = fmt.Errorf("cl100k: embedded rank file: %w", loadErr)
		return
	}
	encoding, loadErr = tokenizer.New(tokenizer.Spec{Name: Name, Ranks: ranks, Split: tokenizer.SplitCL100K, Specials: Specials()})
}

// Specials returns the special tokens tiktoken defines for cl100k_base
// (a new map on every call).
func Specials() map[string]int {
	return map[string]int{
		"<|endoftext|>":   100257,
		"<|fim_prefix|>":  100258,
		"<|fim_middle|>":  100259,
		"<|fim_suffix|>":  100260,
		"<|endofprompt|>": 100276,
	}
}

// Ranks returns the embedded byte-pair vocabulary, parsed on the first call.
func Ranks() (*tokenizer.Ranks, error) {
	once.Do(load)
	return ranks, loadErr
}

// Encoding returns the cl100k_base encoding, built on the first call; later
// calls return the same value.
func Encoding() (*tokenizer.Encoding, error) {
	once.Do(load)
	return encoding, loadErr
}
