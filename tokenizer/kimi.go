package tokenizer

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/k3-project/k3/internal/fileio/regular"
	"github.com/k3-project/k3/internal/fileio/strictjson"
)

// KimiRanksSHA256 is the SHA-256 of the real Kimi tiktoken.model (K2, K2.5
// and K3 share it; 163,584 ranks).
const KimiRanksSHA256 = "b6c497a7469b33ced9c38afb1ad6e47f03f5e5dc05f15930799210ec050c5103"

// KimiNumSpecials is the number of special ids after the ranks.
const KimiNumSpecials = 256

// IsKimiReference reports whether the ranks are byte-identical to the
// released Kimi tiktoken.model. A mismatch is not an error (a user may load a
// modified vocabulary); callers that require the reference file check this.
func (r *Ranks) IsKimiReference() bool {
	return hex.EncodeToString(r.digest[:]) == KimiRanksSHA256
}

// IsKimiReference reports whether the encoding's rank file is the released
// Kimi tiktoken.model (see Ranks.IsKimiReference).
func (e *Encoding) IsKimiReference() bool { return e.ranks.IsKimiReference() }

// MaxConfigFileSize bounds tokenizer_config.json (the released one is tens
// of kilobytes, most of it the chat template).
const MaxConfigFileSize = 4 << 20

// readLimited reads a regular file of at most limit bytes; a larger one is
// refused with ErrTooLarge before it is read.
func readLimited(path string, limit int64) ([]byte, error) {
	data, err := regular.ReadFile(path, limit)
	if errors.Is(err, regular.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return data, err
}

// LoadKimi loads a Kimi tokenizer from tiktoken.model and
// tokenizer_config.json (§10.1–10.2) with the Kimi split rule and the
// tokenization_kimi.py pipeline. Check Ranks().IsKimiReference() to learn
// whether the vocabulary is the released one.
func LoadKimi(modelPath, configPath string) (*Encoding, error) {
	ranks, err := LoadRanks(modelPath)
	if err != nil {
		return nil, err
	}
	cfg, err := readLimited(configPath, MaxConfigFileSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: reading tokenizer config: %w", err)
	}
	enc, err := NewKimi(ranks, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", configPath, err)
	}
	return enc, nil
}

// NewKimi builds a Kimi encoding from parsed ranks and the text of
// tokenizer_config.json. Specials get ids N..N+255: the name from
// added_tokens_decoder when present, otherwise <|reserved_token_{id}|>.
func NewKimi(ranks *Ranks, tokenizerConfig []byte) (*Encoding, error) {
	named, err := parseAddedTokens(tokenizerConfig)
	if err != nil {
		return nil, err
	}
	n := ranks.Len()
	specials := make(map[string]int, KimiNumSpecials)
	bad := -1
	for id := range named {
		if (id < n || id >= n+KimiNumSpecials) && (bad < 0 || id < bad) {
			bad = id
		}
	}
	if bad >= 0 {
		return nil, &SpecialsError{fmt.Sprintf("added_tokens_decoder id %d is outside %d..%d", bad, n, n+KimiNumSpecials-1)}
	}
	for id := n; id < n+KimiNumSpecials; id++ {
		name, ok := named[id]
		if !ok {
			name = "<|reserved_token_" + strconv.Itoa(id) + "|>"
		}
		if other, dup := specials[name]; dup {
			return nil, &SpecialsError{fmt.Sprintf("ids %d and %d have the same name %q", other, id, name)}
		}
		specials[name] = id
	}
	return New(Spec{Name: "kimi", Ranks: ranks, Split: SplitKimi, Specials: specials, KimiCuts: true})
}

// parseAddedTokens reads added_tokens_decoder: {"<id>": {"content": name,
// ...}}. The file is parsed with internal/fileio/strictjson, so duplicate keys
// anywhere, invalid UTF-8 and other laxities are refused; ids must be
// canonical decimals and every entry needs a string content. Other keys are
// ignored.
func parseAddedTokens(data []byte) (map[int]string, error) {
	fail := func(format string, a ...any) error {
		return &SpecialsError{"tokenizer_config.json: " + fmt.Sprintf(format, a...)}
	}
	if len(data) > MaxConfigFileSize {
		return nil, fmt.Errorf("%w: tokenizer_config.json of %d bytes, limit %d", ErrTooLarge, len(data), MaxConfigFileSize)
	}
	root, err := strictjson.ParseLimits(data, strictjson.Limits{MaxBytes: MaxConfigFileSize})
	if err != nil {
		return nil, fail("%v", err)
	}
	if root.Kind() != strictjson.Object {
		return nil, fail("top level is %v, not an object", root.Kind())
	}
	dec := root.Get("added_tokens_decoder")
	if dec == nil {
		return nil, fail("no added_tokens_decoder object")
	}
	if dec.Kind() != strictjson.Object {
		return nil, fail("added_tokens_decoder is %v, not an object", dec.Kind())
	}
	out := make(map[int]string, dec.Len())
	for _, m := range dec.Members() {
		id, ok := parseDecimal([]byte(m.Key))
		if !ok {
			return nil, fail("added_tokens_decoder key %q is not a canonical decimal id", m.Key)
		}
		if m.Value.Kind() != strictjson.Object {
			return nil, fail("added_tokens_decoder[%q] is %v, not an object", m.Key, m.Value.Kind())
		}
		c := m.Value.Get("content")
		if c == nil {
			return nil, fail("added_tokens_decoder[%q] has no content", m.Key)
		}
		name, err := c.Str()
		if err != nil {
			return nil, fail("added_tokens_decoder[%q].content is not a string: %v", m.Key, err)
		}
		out[id] = name
	}
	return out, nil
}
