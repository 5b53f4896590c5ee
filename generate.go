package k3

import (
	"context"
	"fmt"
	"iter"
	"slices"
)

// GenerateOptions configures Model.Generate.
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
}

// Generate decodes greedily (SPEC §4.9) after prompt and yields each token id as it is picked,
// with a nil error. On a failure — an invalid prompt id, a forward error, all-NaN logits or ctx
// being cancelled between tokens — it yields (-1, err) once and stops. It stops after MaxTokens
// tokens or right after a stop id.
func (m *Model) Generate(ctx context.Context, prompt []int, o GenerateOptions) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		if o.MaxTokens < 0 {
			yield(-1, fmt.Errorf("k3: generate: MaxTokens %d < 0", o.MaxTokens))
			return
		}
		if len(prompt) == 0 {
			yield(-1, fmt.Errorf("k3: generate: %w", ErrEmptyInput))
			return
		}
		if o.MaxTokens == 0 {
			return
		}
		if o.FullRecompute {
			m.generateFull(ctx, prompt, o, yield)
			return
		}
		s := m.NewSession()
		if err := s.Prefill(ctx, prompt); err != nil {
			yield(-1, err)
			return
		}
		s.generate(ctx, o, yield)
	}
}

// Generate continues greedily from the session's current logits (after a Prefill), yielding up
// to n tokens and stopping right after any id in stop; each yielded token except the last is fed
// back with Step, so the session ends holding every yielded token but the last.
func (s *Session) Generate(ctx context.Context, n int, stop []int) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		if n < 0 {
			yield(-1, fmt.Errorf("k3: generate: n = %d < 0", n))
			return
		}
		if n == 0 {
			return
		}
		s.generate(ctx, GenerateOptions{MaxTokens: n, Stop: stop}, yield)
	}
}

func (s *Session) generate(ctx context.Context, o GenerateOptions, yield func(int, error) bool) {
	for step := 0; ; step++ {
		if s.broken == nil && s.logits != nil && o.OnLogits != nil {
			o.OnLogits(step, s.logits)
		}
		id, err := s.Next()
		if err != nil {
			yield(-1, err)
			return
		}
		if !yield(id, nil) || step+1 == o.MaxTokens || slices.Contains(o.Stop, id) {
			return
		}
		if err := ctx.Err(); err != nil {
			yield(-1, err)
			return
		}
		if err := s.Step(ctx, id); err != nil {
			yield(-1, err)
			return
		}
	}
}

func (m *Model) generateFull(ctx context.Context, prompt []int, o GenerateOptions, yield func(int, error) bool) {
	ids := slices.Clone(prompt)
	for step := 0; ; step++ {
		if step > 0 {
			if err := ctx.Err(); err != nil {
				yield(-1, err)
				return
			}
		}
		s := m.NewSession()
		if err := s.Prefill(ctx, ids); err != nil {
			yield(-1, err)
			return
		}
		if o.OnLogits != nil {
			o.OnLogits(step, s.logits)
		}
		id, err := Argmax(s.logits)
		if err != nil {
			yield(-1, err)
			return
		}
		if !yield(id, nil) || step+1 == o.MaxTokens || slices.Contains(o.Stop, id) {
			return
		}
		ids = append(ids, id)
	}
}
