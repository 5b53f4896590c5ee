package k3

import (
	"context"
	"fmt"
	"iter"

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
	// bytes that may begin a stop string are held back until they cannot. The slice is only
	// valid during the call.
	OnText func(text []byte)
	// MaxContext > 0 is the most positions the session may hold: generation stops with
	// StopContext when the last yielded token could not be processed within it, and a longer
	// prompt is refused with ErrContextFull. 0 is no limit.
	MaxContext int
	// Speculative > 0 enables exact prompt-lookup speculative decoding with drafts of at most
	// this many tokens (see speculative.go); the yielded ids are those of plain decoding with
	// the same Sampler (identical for greedy, identically distributed when sampling). It needs
	// incremental mode.
	Speculative int
	// OnDone, if set, is called once when generation ends, with why and what it produced.
	OnDone func(GenerateResult)

	// drafter replaces prompt lookup in tests (hist: the ids so far; at most k ids).
	drafter func(hist []int, k int) []int
}

// Generate decodes after prompt — greedily (SPEC §4.9) or with o.Sampler — and yields each token
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
