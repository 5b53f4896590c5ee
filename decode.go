package k3

import (
	"context"
	"fmt"
	"slices"

	"github.com/k3-project/k3/sample"
)

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
}

func newGenRun(o *GenerateOptions, hist []int, yield func(int, error) bool) (*genRun, error) {
	g := &genRun{o: o, yield: yield, hist: hist}
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
	g, err := newGenRun(&o, s.IDs(), yield)
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
	g, err := newGenRun(&o, ids, yield)
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
