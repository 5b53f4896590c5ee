package tokenizer

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Mode is the special-token policy of Encode. With KimiCuts, names are
// searched within each cut piece (as tokenization_kimi.py does), so a name
// straddling a cut is neither recognised nor rejected.
type Mode uint8

const (
	// NoSpecial treats special names as ordinary text (tiktoken's
	// encode_ordinary). It is the zero value: text never becomes control
	// tokens unless asked.
	NoSpecial Mode = iota
	// AllowSpecial turns every special name into its id (tiktoken's
	// allowed_special="all"; the Kimi reference tokenizer's behaviour).
	AllowSpecial
	// RejectSpecial refuses text that contains any special name with a
	// *DisallowedSpecialError (tiktoken's default for encode).
	RejectSpecial
)

// Kimi pipeline constants (tokenization_kimi.py, §10.6).
const (
	KimiChunkCodePoints = 400_000
	KimiMaxRun          = 25_000
)

// Spec describes an encoding to build with New.
type Spec struct {
	// Name is informative (returned by Encoding.Name).
	Name string
	// Ranks is the byte-pair vocabulary.
	Ranks *Ranks
	// Split selects the pre-tokenizer.
	Split SplitRule
	// Specials maps special names to ids, which must be ≥ Ranks.Len() and
	// distinct. Names must be non-empty valid UTF-8, not ranked tokens, and
	// no name may occur inside another or overlap one (a proper suffix of
	// one equal to a proper prefix of another).
	Specials map[string]int
	// KimiCuts applies tokenization_kimi.py's 400,000-code-point chunks and
	// 25,000-code-point isspace-run cuts before splitting.
	KimiCuts bool
}

// Encoding is a ready tokenizer. It is immutable and safe for concurrent
// use.
type Encoding struct {
	name     string
	ranks    *Ranks
	split    SplitRule
	specials *specialSet
	byID     map[int]int // special id -> index in specials.names
	allowAll []bool      // every special allowed (AllowSpecial)
	maxID    int
	kimiCuts bool
	char3    *char3Table
	// chars is built on the first piece outside ASCII (see charTable), so
	// that encoding ASCII text never pays for it.
	charsOnce sync.Once
	chars     *charTable
}

// New validates spec and builds an encoding.
func New(spec Spec) (*Encoding, error) {
	if spec.Ranks == nil {
		return nil, fmt.Errorf("tokenizer: %s: no ranks", spec.Name)
	}
	if !spec.Split.valid() {
		return nil, fmt.Errorf("tokenizer: %s: invalid split rule %d", spec.Name, uint8(spec.Split))
	}
	n := spec.Ranks.Len()
	names := make([]string, 0, len(spec.Specials))
	for name := range spec.Specials {
		names = append(names, name)
	}
	// Sorted by id, so that errors and SpecialTokens are deterministic.
	sort.Slice(names, func(i, j int) bool { return spec.Specials[names[i]] < spec.Specials[names[j]] })
	ids := make([]int, len(names))
	byID := make(map[int]int, len(names))
	maxID := n - 1
	for i, name := range names {
		id := spec.Specials[name]
		if id < n {
			return nil, &SpecialsError{fmt.Sprintf("%q has id %d, inside the ranks 0..%d", name, id, n-1)}
		}
		if _, dup := byID[id]; dup {
			return nil, &SpecialsError{fmt.Sprintf("id %d is given to two names", id)}
		}
		ids[i], byID[id] = id, i
		if id > maxID {
			maxID = id
		}
	}
	set, err := newSpecialSet(names, ids, spec.Ranks)
	if err != nil {
		return nil, err
	}
	classTab()
	all := make([]bool, len(names))
	for i := range all {
		all[i] = true
	}
	return &Encoding{name: spec.Name, ranks: spec.Ranks, split: spec.Split, specials: set, byID: byID, allowAll: all, maxID: maxID, kimiCuts: spec.KimiCuts,
		char3: newChar3Table(spec.Ranks)}, nil
}

// Name returns the encoding's name.
func (e *Encoding) Name() string { return e.name }

// Ranks returns the vocabulary.
func (e *Encoding) Ranks() *Ranks { return e.ranks }

// Split returns the split rule.
func (e *Encoding) Split() SplitRule { return e.split }

// VocabSize returns the largest id plus one (tiktoken's n_vocab). Ids in
// gaps between ranks and specials are not decodable.
func (e *Encoding) VocabSize() int { return e.maxID + 1 }

// SpecialTokens returns a copy of the special-token map.
func (e *Encoding) SpecialTokens() map[string]int {
	m := make(map[string]int, len(e.specials.names))
	for i, name := range e.specials.names {
		m[name] = e.specials.ids[i]
	}
	return m
}

// SpecialNames returns the special names in id order (tiktoken's
// special_tokens_set, as a slice).
func (e *Encoding) SpecialNames() []string {
	return append([]string(nil), e.specials.names...)
}

// TokenBytes returns a copy of the bytes of id: a ranked token's bytes or a
// special's name.
func (e *Encoding) TokenBytes(id int) ([]byte, error) {
	b, ok := e.tokenBytes(id)
	if !ok {
		return nil, &UnknownIDError{ID: id}
	}
	return append([]byte(nil), b...), nil
}

func (e *Encoding) tokenBytes(id int) ([]byte, bool) {
	if b, ok := e.ranks.Token(id); ok {
		return b, true
	}
	if i, ok := e.byID[id]; ok {
		return []byte(e.specials.names[i]), true
	}
	return nil, false
}

// TokenID returns the id of the token whose bytes are exactly b (a ranked
// token or a special name).
func (e *Encoding) TokenID(b []byte) (int, bool) {
	if r, ok := e.ranks.lookup(string(b)); ok {
		return int(r), true
	}
	for i, name := range e.specials.names {
		if name == string(b) {
			return e.specials.ids[i], true
		}
	}
	return 0, false
}

// policy is the resolved special-token policy of one encode call.
type policy struct {
	allowed []bool // per special index; nil = none allowed
	reject  bool   // a special that is not allowed is an error
}

// Encode encodes text under mode.
func (e *Encoding) Encode(text string, mode Mode) ([]int, error) {
	p, err := e.policyFor(mode)
	if err != nil {
		return nil, err
	}
	return e.encode(text, p)
}

// EncodeOrdinary encodes text with special names as ordinary text
// (Encode(text, NoSpecial)).
func (e *Encoding) EncodeOrdinary(text string) ([]int, error) {
	return e.encode(text, policy{})
}

// EncodeWith mirrors tiktoken's encode(text, allowed_special,
// disallowed_special): names in allowed become ids; when rejectOthers is
// true (tiktoken's disallowed_special="all"), any other special name in the
// text is an error, otherwise it is ordinary text. An allowed name that is
// not a special of this encoding is an error.
func (e *Encoding) EncodeWith(text string, allowed []string, rejectOthers bool) ([]int, error) {
	p := policy{allowed: make([]bool, len(e.specials.names)), reject: rejectOthers}
	for _, a := range allowed {
		found := false
		for i, name := range e.specials.names {
			if name == a {
				p.allowed[i], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("tokenizer: %q is not a special token of %s", a, e.name)
		}
	}
	return e.encode(text, p)
}

// policyFor resolves mode.
func (e *Encoding) policyFor(mode Mode) (policy, error) {
	switch mode {
	case NoSpecial:
		return policy{}, nil
	case AllowSpecial:
		return policy{allowed: e.allowAll}, nil
	case RejectSpecial:
		return policy{reject: true}, nil
	}
	return policy{}, fmt.Errorf("tokenizer: invalid mode %d", mode)
}

// BatchError reports which text of an EncodeBatch call failed; Err is what
// Encode returns for that text.
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string { return fmt.Sprintf("%v (text %d of the batch)", e.Err, e.Index) }

// Unwrap returns Err, so errors.Is and errors.As see the underlying error.
func (e *BatchError) Unwrap() error { return e.Err }

// EncodeBatch encodes every text under mode on up to workers goroutines
// (workers < 1 means 1) and returns the ids in the order of texts; element i
// equals Encode(texts[i], mode). Texts are handed out one at a time, so
// batches of uneven texts keep every worker busy. On failure it returns a
// *BatchError for the lowest failing index and no ids.
func (e *Encoding) EncodeBatch(texts []string, mode Mode, workers int) ([][]int, error) {
	p, err := e.policyFor(mode)
	if err != nil {
		return nil, err
	}
	out := make([][]int, len(texts))
	errs := make([]error, len(texts))
	workers = max(1, min(workers, len(texts)))
	var next atomic.Int64
	work := func() {
		// One scratch per worker: its memo then serves all of the worker's
		// texts, and ids never depend on which worker encoded a text.
		sc := e.newScratch()
		for {
			i := int(next.Add(1) - 1)
			if i >= len(texts) {
				return
			}
			out[i], errs[i] = e.encodeScratch(texts[i], p, sc)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, &BatchError{Index: i, Err: err}
		}
	}
	return out, nil
}

// newScratch returns buffers for one Encode call or one EncodeBatch worker.
func (e *Encoding) newScratch() *scratch { return &scratch{char3: e.char3, enc: e} }

// charTable returns the encoding's bpeChars table (nil if the ranks do not
// fit its packing), building it on first use: a few milliseconds for a
// 200,000-token vocabulary.
func (e *Encoding) charTable() *charTable {
	e.charsOnce.Do(func() { e.chars = newCharTable(e.ranks, e.char3) })
	return e.chars
}

func (e *Encoding) encode(text string, p policy) ([]int, error) {
	return e.encodeScratch(text, p, e.newScratch())
}

// encodeScratch is encode with the caller's scratch.
func (e *Encoding) encodeScratch(text string, p policy, sc *scratch) ([]int, error) {
	if err := checkUTF8(text); err != nil {
		return nil, err
	}
	tab := classTab()
	dst := make([]int, 0, len(text)/4+1)
	var err error
	if !e.kimiCuts {
		return e.encodePiece(dst, tab, text, 0, p, sc)
	}
	// tokenization_kimi.py: 400,000-code-point chunks, each cut where a run
	// of equal str.isspace class would exceed 25,000 code points.
	pieceStart, inChunk, runLen := 0, 0, 0
	space := false
	for i := 0; i < len(text); {
		c, sz, k := decodeAt(tab, text, i)
		if inChunk == KimiChunkCodePoints {
			if dst, err = e.encodePiece(dst, tab, text[pieceStart:i], pieceStart, p, sc); err != nil {
				return nil, err
			}
			pieceStart, inChunk = i, 0
		}
		sp := isPySpace(c, k)
		switch {
		case inChunk == 0 || sp != space:
			space, runLen = sp, 1
		default:
			runLen++
			if runLen > KimiMaxRun {
				if dst, err = e.encodePiece(dst, tab, text[pieceStart:i], pieceStart, p, sc); err != nil {
					return nil, err
				}
				pieceStart, runLen = i, 1
			}
		}
		inChunk++
		i += sz
	}
	return e.encodePiece(dst, tab, text[pieceStart:], pieceStart, p, sc)
}

// encodePiece handles special names in s (which starts at byte base of the
// caller's text) and splits and merges the text between them.
func (e *Encoding) encodePiece(dst []int, tab []uint8, s string, base int, p policy, sc *scratch) ([]int, error) {
	start := 0
	if p.allowed != nil || p.reject {
		for from := 0; ; {
			at, idx := e.specials.find(s, from)
			if at < 0 {
				break
			}
			if p.allowed != nil && p.allowed[idx] {
				dst = e.encodeOrdinary(dst, tab, s[start:at], sc)
				dst = append(dst, e.specials.ids[idx])
				start = at + len(e.specials.names[idx])
				from = start
				continue
			}
			if p.reject {
				return nil, &DisallowedSpecialError{Name: e.specials.names[idx], Offset: base + at}
			}
			from = at + 1
		}
	}
	return e.encodeOrdinary(dst, tab, s[start:], sc), nil
}

// encodeOrdinary splits s (a segment: look-ahead stops at its end) and
// merges each piece.
func (e *Encoding) encodeOrdinary(dst []int, tab []uint8, s string, sc *scratch) []int {
	for i := 0; i < len(s); {
		j := e.split.next(tab, s, i)
		if cap(dst)-len(dst) < j-i {
			dst = grow(dst, j-i)
		}
		dst = e.ranks.bpe(dst, s[i:j], sc)
		i = j
	}
	return dst
}

// grow returns dst with room for n more ids. It doubles: append's growth
// for large slices (about 1.25×) copies the ids of a long text several
// times over, which costs as much as splitting it.
func grow(dst []int, n int) []int {
	d := make([]int, len(dst), max(2*cap(dst), len(dst)+n))
	copy(d, dst)
	return d
}

// CountTokens returns len(Encode(text, mode)).
func (e *Encoding) CountTokens(text string, mode Mode) (int, error) {
	ids, err := e.Encode(text, mode)
	return len(ids), err
}
