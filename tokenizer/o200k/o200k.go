// Package o200k is OpenAI's o200k_base encoding, ready to use: the rank file
// is embedded in this package (so only programs that import it carry its
// 3,613,922 bytes), the split rule is tokenizer.SplitO200K and the special tokens are
// the ones tiktoken defines for o200k_base:
//
//	<|endoftext|> 199999
//	<|endofprompt|> 200018
//
// Encoding is the equivalent of tiktoken.get_encoding("o200k_base"). Its ids
// equal tiktoken's for both encode_ordinary (tokenizer.NoSpecial) and
// encode(text, allowed_special="all") (tokenizer.AllowSpecial).
//
// The rank data are OpenAI's, published with tiktoken under the MIT licence;
// see the NOTICE file in this directory.
package o200k

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"github.com/k3-project/k3/tokenizer"
)

// Name is the encoding's name in tiktoken.
const Name = "o200k_base"

// RanksSHA256 is the SHA-256 of the embedded rank file, equal to the one
// OpenAI publishes.
const RanksSHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

// NumRanks is the number of byte-pair ranks (ids 0..NumRanks-1).
const NumRanks = 199998

//go:embed o200k_base.tiktoken
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
		loadErr = fmt.Errorf("o200k: embedded rank file: %w", loadErr)
		return
	}
	encoding, loadErr = tokenizer.New(tokenizer.Spec{Name: Name, Ranks: ranks, Split: tokenizer.SplitO200K, Specials: Specials()})
}

// Specials returns the special tokens tiktoken defines for o200k_base
// (a new map on every call).
func Specials() map[string]int {
	return map[string]int{
		"<|endoftext|>":   199999,
		"<|endofprompt|>": 200018,
	}
}

// Ranks returns the embedded byte-pair vocabulary, parsed on the first call.
func Ranks() (*tokenizer.Ranks, error) {
	once.Do(load)
	return ranks, loadErr
}

// Encoding returns the o200k_base encoding, built on the first call; later
// calls return the same value.
func Encoding() (*tokenizer.Encoding, error) {
	once.Do(load)
	return encoding, loadErr
}
