package k3

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"slices"
	"sync/atomic"
	"unicode/utf8"

	"github.com/k3-project/k3/sample"
)

// GenerateOptions configures Model.Generate and Session.Generate.
type GenerateOptions struct {
	// MaxTokens is the number of tokens to generate at most (≥ 0).
	MaxTokens int
	// Stop ends generation right after any of these ids is emitted (it is yielded first).
	Stop []int
	// FullRecompute runs a fresh session over all ids for every token (O(T²), the oracle's own
	// mode) instead of carrying state incrementally. Both give bit-identical logits.
	FullRecompute bool
	// OnLogits, if set, is called before each pick with the step number (0 = the token after
	// the prompt) and the logits the pick is made from. The slice is only valid during the call.
	OnLogits func(step int, logits []float32)

	// Sampler picks each token (its penalties see the prompt and the tokens so far); nil is
	// greedy decoding (sample.Argmax). Generation advances the sampler's random stream.
	Sampler *sample.Sampler
	// StopStrings end generation once the decoded text contains any of them: the token that
	// completes one is the last yielded, and the text (OnText, GenerateResult.Text) ends just
	// before the stop string. Matching is on bytes across token boundaries. Needs Tokens.
	StopStrings []string
	// Tokens decodes ids for StopStrings and OnText.
	Tokens TokenBytes
	// OnText, if set (with Tokens), receives the generated text in order as it becomes final;
	// bytes that may begin a stop string, and a UTF-8 sequence that a later token may complete,
	// are held back until they cannot, so that every piece of valid UTF-8 text ends on a
	// character boundary (invalid bytes are passed on as they are). The slice is only valid
	// during the call.
	OnText func(text []byte)
	// MaxContext > 0 is the most positions the session may hold: generation stops with
	// StopContext when the last yielded token could not be processed within it, and a longer
	// prompt is refused with ErrContextFull. 0 is no limit.
	MaxContext int
	// Speculative > 0 enables exact prompt-lookup speculative decoding with drafts of at most
	// this many tokens, looked up in the ids so far and verified in one batched pass; the
	// yielded ids are those of plain decoding with the same Sampler (identical for greedy,
	// identically distributed when sampling). It needs incremental mode.
	Speculative int
	// OnDone, if set, is called once when generation ends, with why and what it produced.
	OnDone func(GenerateResult)

	// drafter replaces prompt lookup in tests (hist: the ids so far; at most k ids).
	drafter func(hist []int, k int) []int
}

// Generate decodes after prompt — greedily (§4.9) or with o.Sampler — and yields each token
// id as it is picked, with a nil error. On a failure — an invalid prompt id or option, a forward
// error, all-NaN logits or ctx being cancelled between tokens — it yields (-1, err) once and
// stops. It stops after MaxTokens tokens, right after a stop id or stop string, or when
// MaxContext is reached; o.OnDone learns which.
func (m *Model) Generate(ctx context.Context, prompt []int, o GenerateOptions) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		if err := o.validate(); err != nil {
			failEarly(o, yield, err)
			return
		}
		if len(prompt) == 0 {
			failEarly(o, yield, fmt.Errorf("k3: generate: %w", ErrEmptyInput))
			return
		}
		if o.MaxContext > 0 && len(prompt) > o.MaxContext {
			failEarly(o, yield, fmt.Errorf("%w: prompt of %d ids, MaxContext %d", ErrContextFull, len(prompt), o.MaxContext))
			return
		}
		if o.MaxTokens == 0 {
			if o.OnDone != nil {
				o.OnDone(GenerateResult{Reason: StopMaxTokens})
			}
			return
		}
		if o.FullRecompute {
			m.generateFull(ctx, prompt, o, yield)
			return
		}
		s := m.NewSession()
		if err := s.Prefill(ctx, prompt); err != nil {
			failEarly(o, yield, err)
			return
		}
		s.generate(ctx, o, yield)
	}
}

// Generate continues from the session's current logits (after a Prefill, Step or
// LoadSession) with every option of Model.Generate except FullRecompute; the penalties and the
// prompt lookup see the session's ids (IDs). Like Model.Generate, the session ends holding every
// yielded token but the last: Step it to continue the conversation (or before Save).
func (s *Session) Generate(ctx context.Context, o GenerateOptions) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		if err := o.validate(); err != nil {
			failEarly(o, yield, err)
			return
		}
		if o.FullRecompute {
			failEarly(o, yield, fmt.Errorf("k3: generate: FullRecompute needs Model.Generate"))
			return
		}
		if o.MaxTokens == 0 {
			if o.OnDone != nil {
				o.OnDone(GenerateResult{Reason: StopMaxTokens})
			}
			return
		}
		s.generate(ctx, o, yield)
	}
}

// TokenBytes maps a token id to the bytes it decodes to; *tokenizer.Encoding implements it.
// Generation needs it for StopStrings and OnText.
type TokenBytes interface {
	TokenBytes(id int) ([]byte, error)
}

// StopReason says why Generate ended.
type StopReason uint8

const (
	StopNone      StopReason = iota // generation has not ended
	StopMaxTokens                   // MaxTokens tokens were emitted
	StopID                          // an id in Stop was emitted (it is the last one yielded)
	StopString                      // the decoded text reached a stop string
	StopContext                     // the session holds MaxContext positions: no further token fits
	StopError                       // an error was yielded (including ctx cancellation)
	StopConsumer                    // the caller stopped the iteration
)

var stopNames = [...]string{"none", "length", "stop_id", "stop_string", "context", "error", "consumer"}

// String returns the JSON name of the reason ("length", "stop_id", "stop_string", ...).
func (r StopReason) String() string {
	if int(r) < len(stopNames) {
		return stopNames[r]
	}
	return fmt.Sprintf("StopReason(%d)", r)
}

// GenerateResult describes a finished generation (GenerateOptions.OnDone).
type GenerateResult struct {
	Reason StopReason
	Err    error // the error yielded when Reason is StopError
	// Tokens is the number of ids yielded.
	Tokens int
	// Text is the generated text when GenerateOptions.Tokens is set: the bytes of the yielded
	// ids, ending just before the stop string when Reason is StopString (bytes, not a string:
	// a token may end inside a UTF-8 sequence). StopText is the stop string that matched.
	Text     []byte
	StopText string
	// Speculative decoding counts: forward passes that verified drafts, draft tokens verified
	// and accepted.
	Verifies, Drafted, Accepted int
}

// stopText matches stop strings on the decoded byte stream. Bytes that could still be the start
// of a stop string are held back, so the released text never holds a stop string or a part of
// one that turns out to complete it; so is an incomplete character at the end.
type stopText struct {
	tok     TokenBytes
	stops   [][]byte
	pending []byte
	out     []byte // every released byte
	onText  func([]byte)
}

func newStopText(tok TokenBytes, stops []string, onText func([]byte)) (*stopText, error) {
	st := &stopText{tok: tok, onText: onText}
	for i, s := range stops {
		if s == "" {
			return nil, fmt.Errorf("k3: generate: stop string %d is empty", i)
		}
		st.stops = append(st.stops, []byte(s))
	}
	return st, nil
}

// push appends id's bytes and releases what is final. It reports the matched stop string.
func (st *stopText) push(id int) (string, error) {
	b, err := st.tok.TokenBytes(id)
	if err != nil {
		return "", fmt.Errorf("k3: generate: decoding token %d: %w", id, err)
	}
	st.pending = append(st.pending, b...)
	// The earliest match wins; among matches starting at the same byte, the first listed.
	at, which := -1, -1
	for i, s := range st.stops {
		if j := bytes.Index(st.pending, s); j >= 0 && (at < 0 || j < at) {
			at, which = j, i
		}
	}
	if at >= 0 {
		st.release(at)
		st.pending = st.pending[:0]
		return string(st.stops[which]), nil
	}
	st.release(len(st.pending) - max(st.hold(), incompleteTail(st.pending)))
	return "", nil
}

// incompleteTail is the length of the sequence at the end of b that is valid so far but not a
// whole character: a later token may complete it. It cuts only before a byte that starts a
// sequence, so a caller that replaces invalid bytes piece by piece gets the text it would get
// replacing them in the whole.
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i > len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return len(b) - i
			}
			break
		}
	}
	return 0
}

// hold returns the length of the longest suffix of pending that is a proper prefix of a stop
// string: only there can a later token complete a match.
func (st *stopText) hold() int {
	h := 0
	for _, s := range st.stops {
		for n := min(len(s)-1, len(st.pending)); n > h; n-- {
			if bytes.Equal(st.pending[len(st.pending)-n:], s[:n]) {
				h = n
				break
			}
		}
	}
	return h
}

func (st *stopText) release(n int) {
	if n <= 0 {
		return
	}
	chunk := st.pending[:n]
	st.out = append(st.out, chunk...)
	if st.onText != nil {
		st.onText(chunk)
	}
	st.pending = append(st.pending[:0], st.pending[n:]...)
}

// flush releases the held-back bytes at the end of a generation that no stop string ended.
func (st *stopText) flush() { st.release(len(st.pending)) }

// validate checks the options that do not depend on the model.
func (o *GenerateOptions) validate() error {
	switch {
	case o.MaxTokens < 0:
		return fmt.Errorf("k3: generate: MaxTokens %d < 0", o.MaxTokens)
	case o.MaxContext < 0:
		return fmt.Errorf("k3: generate: MaxContext %d < 0", o.MaxContext)
	case o.Speculative < 0:
		return fmt.Errorf("k3: generate: Speculative %d < 0", o.Speculative)
	case o.Speculative > MaxSpeculative:
		return fmt.Errorf("k3: generate: Speculative %d > %d", o.Speculative, MaxSpeculative)
	case o.Speculative > 0 && o.FullRecompute:
		return fmt.Errorf("k3: generate: Speculative needs incremental mode, not FullRecompute")
	case (len(o.StopStrings) > 0 || o.OnText != nil) && o.Tokens == nil:
		return fmt.Errorf("k3: generate: StopStrings and OnText need Tokens to decode ids")
	}
	for i, s := range o.StopStrings {
		if s == "" {
			return fmt.Errorf("k3: generate: stop string %d is empty", i)
		}
	}
	return nil
}

// failEarly reports an error before any token, through both the iterator and OnDone.
func failEarly(o GenerateOptions, yield func(int, error) bool, err error) {
	if o.OnDone != nil {
		o.OnDone(GenerateResult{Reason: StopError, Err: err})
	}
	yield(-1, err)
}

// genRun is one generation's bookkeeping: the ids so far (for the sampler's penalties and the
// prompt lookup), the stop-string matcher and the result.
type genRun struct {
	o     *GenerateOptions
	yield func(int, error) bool
	hist  []int
	text  *stopText
	res   GenerateResult
	step  int // picks made so far (OnLogits' step)
	// generated is the model's count of generated tokens (Stats.Tokens).
	generated *atomic.Int64
}

func newGenRun(m *Model, o *GenerateOptions, hist []int, yield func(int, error) bool) (*genRun, error) {
	g := &genRun{o: o, yield: yield, hist: hist, generated: &m.generated}
	if o.Tokens != nil {
		st, err := newStopText(o.Tokens, o.StopStrings, o.OnText)
		if err != nil {
			return nil, err
		}
		g.text = st
	}
	return g, nil
}

// pick chooses the next token from logits, after showing them to OnLogits.
func (g *genRun) pick(logits []float32) (int, error) {
	if g.o.OnLogits != nil {
		g.o.OnLogits(g.step, logits)
	}
	g.step++
	if g.o.Sampler == nil {
		return sample.Argmax(logits)
	}
	return g.o.Sampler.Sample(logits, g.hist)
}

// emit yields id and applies the stop rules. It returns false when generation ends (the
// reason recorded).
func (g *genRun) emit(id int) bool {
	g.hist = append(g.hist, id)
	reason := StopNone
	if slices.Contains(g.o.Stop, id) {
		reason = StopID
	}
	if g.text != nil {
		matched, err := g.text.push(id)
		if err != nil {
			g.fail(err)
			return false
		}
		if matched != "" && reason == StopNone {
			reason, g.res.StopText = StopString, matched
		}
	}
	g.res.Tokens++
	g.generated.Add(1)
	if !g.yield(id, nil) {
		g.res.Reason = StopConsumer
		return false
	}
	if reason == StopNone && g.res.Tokens == g.o.MaxTokens {
		reason = StopMaxTokens
	}
	if reason != StopNone {
		g.res.Reason = reason
		return false
	}
	return true
}

// accept emits id and then makes the checks both generation loops make before feeding it
// back: ctx done, and ctxLen (the ids the model has seen, id not among them) at MaxContext.
// It returns false when generation ends (the reason recorded).
func (g *genRun) accept(ctx context.Context, id, ctxLen int) bool {
	if !g.emit(id) {
		return false
	}
	if err := ctx.Err(); err != nil {
		g.fail(err)
		return false
	}
	if g.o.MaxContext > 0 && ctxLen >= g.o.MaxContext {
		g.res.Reason = StopContext
		return false
	}
	return true
}

func (g *genRun) fail(err error) {
	g.res.Reason, g.res.Err = StopError, err
	g.yield(-1, err)
}

func (g *genRun) finish() {
	if g.text != nil {
		if g.res.Reason != StopString {
			g.text.flush()
		}
		g.res.Text = g.text.out
	}
	if g.o.OnDone != nil {
		g.o.OnDone(g.res)
	}
}

// generate is the incremental loop: pick, yield, and feed the token back (one Step, or one
// speculative verification pass that may settle several tokens).
func (s *Session) generate(ctx context.Context, o GenerateOptions, yield func(int, error) bool) {
	g, err := newGenRun(s.m, &o, s.IDs(), yield)
	if err != nil {
		failEarly(o, yield, err)
		return
	}
	defer g.finish()
	var spec *speculator
	if o.Speculative > 0 {
		spec = newSpeculator(s, o.Speculative)
	}
	next := -1 // a token already decided by a verification pass
	for {
		id := next
		if id < 0 {
			if s.broken != nil {
				g.fail(s.broken)
				return
			}
			if s.logits == nil {
				g.fail(ErrNoLogits)
				return
			}
			if id, err = g.pick(s.logits); err != nil {
				g.fail(err)
				return
			}
		}
		if !g.accept(ctx, id, s.Len()) {
			return
		}
		if spec != nil {
			var done bool
			if next, done, err = spec.advance(ctx, g, id); err != nil {
				g.fail(err)
				return
			}
			if done {
				return
			}
			continue
		}
		next = -1
		if err := s.Step(ctx, id); err != nil {
			g.fail(err)
			return
		}
	}
}

// generateFull runs a fresh session over all ids for every token (the oracle's own mode).
func (m *Model) generateFull(ctx context.Context, prompt []int, o GenerateOptions, yield func(int, error) bool) {
	ids := slices.Clone(prompt)
	g, err := newGenRun(m, &o, ids, yield)
	if err != nil {
		failEarly(o, yield, err)
		return
	}
	defer g.finish()
	for {
		s := m.NewSession()
		if err := s.Prefill(ctx, g.hist); err != nil {
			g.fail(err)
			return
		}
		id, err := g.pick(s.logits)
		if err != nil {
			g.fail(err)
			return
		}
		if !g.accept(ctx, id, len(g.hist)) {
			return
		}
	}
}
