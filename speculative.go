package k3

import (
	"context"
	"fmt"
	"slices"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/sample"
)

// MaxSpeculative is the longest draft GenerateOptions.Speculative accepts.
const MaxSpeculative = 32

// Prompt lookup matches the longest suffix of the ids so far, of specMaxNGram down to
// specMinNGram ids, against its most recent earlier occurrence, and drafts what followed it.
const (
	specMaxNGram = 3
	specMinNGram = 2
)

// speculator runs exact prompt-lookup speculative decoding on a session.
//
// With the token t0 just emitted and drafts d1..dk looked up in the ids so far, one batched
// pass (PrefillAll, every weight read once) processes t0, d1..dk and gives the logits after
// each. Draft d(i+1) is accepted when the pick from the logits after d(i) — greedy, or the
// speculative-sampling rule for a point-mass draft (sample.Sampler.Accept) — is d(i+1); the first
// rejection yields the pick made instead. Because every logit row is bit-identical to the one
// plain decoding computes at that position (§4.10), greedy output is the plain greedy
// output by construction. Rejected positions are rolled back exactly: the KDA states and conv
// tails are restored from a copy taken before the pass (KDA state cannot be un-stepped), the
// MLA caches are truncated, and the accepted prefix is recomputed in one pass.
//
// Drafting adapts, because a rejected draft costs a verification pass plus the recomputation:
// the draft length starts at k, halves after a partial acceptance and doubles back after a full
// one; a draft rejected at its first id also pauses drafting for 2, 4, 8, ... (at most
// maxBackoff) tokens, reset by the next accepted id. Text that is not being quoted thus pays
// for a few failed verifications, not one per token.
type speculator struct {
	s     *Session
	k     int // current draft limit
	max   int
	saved []*attention.KDAState // by layer; nil for MLA layers
	buf   []int
	// skip is how many tokens to advance without drafting; backoff the last pause.
	skip, backoff int
}

// maxBackoff is the longest drafting pause after repeated first-id rejections.
const maxBackoff = 32

func newSpeculator(s *Session, k int) *speculator {
	sp := &speculator{s: s, k: k, max: k, saved: make([]*attention.KDAState, len(s.kda))}
	for l, st := range s.kda {
		if st != nil {
			sp.saved[l] = st.Clone()
		}
	}
	return sp
}

// lookupDraft returns up to k ids that followed the most recent earlier occurrence of the
// longest suffix n-gram of hist (nil when there is none).
func lookupDraft(hist []int, k int) []int {
	for n := specMaxNGram; n >= specMinNGram; n-- {
		if len(hist) <= n {
			continue
		}
		suf := hist[len(hist)-n:]
		for start := len(hist) - n - 1; start >= 0; start-- {
			if hist[start] == suf[0] && slices.Equal(hist[start:start+n], suf) {
				return hist[start+n : min(start+n+k, len(hist))]
			}
		}
	}
	return nil
}

// advance feeds the emitted token t0 to the session, speculating when a draft exists. It
// returns the next token when a verification already decided it (−1: pick from the session's
// logits) and done when generation ended inside the pass.
func (sp *speculator) advance(ctx context.Context, g *genRun, t0 int) (next int, done bool, err error) {
	s := sp.s
	limit := sp.k
	// The last token generation may emit is picked from the logits, never drafted, so a full
	// acceptance needs no rollback; and the pass must fit in MaxContext.
	limit = min(limit, g.o.MaxTokens-g.res.Tokens-1)
	if g.o.MaxContext > 0 {
		limit = min(limit, g.o.MaxContext-s.Len()-1)
	}
	var draft []int
	if sp.skip > 0 {
		sp.skip--
		limit = 0
	}
	if limit > 0 {
		if g.o.drafter != nil {
			draft = g.o.drafter(g.hist, limit)
		} else {
			draft = lookupDraft(g.hist, limit)
		}
	}
	if len(draft) == 0 {
		return -1, false, s.Step(ctx, t0)
	}
	for l, st := range s.kda {
		if st != nil {
			if err := sp.saved[l].CopyFrom(st); err != nil {
				return -1, false, err
			}
		}
	}
	p0 := s.Len()
	sp.buf = append(append(sp.buf[:0], t0), draft...)
	draft = sp.buf[1:] // g.hist grows below; keep the draft in our own buffer
	rows, err := s.PrefillAll(ctx, sp.buf)
	if err != nil {
		return -1, false, err
	}
	g.res.Verifies++
	g.res.Drafted += len(draft)
	for i, d := range draft {
		if g.o.OnLogits != nil {
			g.o.OnLogits(g.step, rows[i])
		}
		g.step++
		var x int
		var ok bool
		if g.o.Sampler == nil {
			x, err = sample.Argmax(rows[i])
			ok = err == nil && x == d
		} else {
			x, ok, err = g.o.Sampler.Accept(rows[i], g.hist, d)
		}
		if err != nil {
			return -1, false, err
		}
		if !ok {
			if i == 0 {
				sp.backoff = min(maxBackoff, max(1, 2*sp.backoff))
				sp.skip = sp.backoff
			} else {
				sp.k, sp.backoff = max(1, sp.k/2), 0
			}
			return x, false, sp.rollback(ctx, p0, i+1)
		}
		g.res.Accepted++
		if !g.emit(d) {
			// The session holds every yielded token but the last.
			return -1, true, sp.rollback(ctx, p0, i+1)
		}
	}
	sp.k, sp.backoff = min(sp.max, 2*sp.k), 0
	return -1, false, nil
}

// rollback returns the session to p0 positions and reprocesses the first n ids of the pass.
func (sp *speculator) rollback(ctx context.Context, p0, n int) error {
	s := sp.s
	for l := range s.kda {
		if sp.saved[l] != nil {
			if err := s.kda[l].CopyFrom(sp.saved[l]); err != nil {
				return fmt.Errorf("k3: speculative rollback, layer %d: %w", l, err)
			}
		}
		if s.mla[l] != nil {
			if err := s.mla[l].Truncate(p0); err != nil {
				return fmt.Errorf("k3: speculative rollback, layer %d: %w", l, err)
			}
		}
	}
	s.pos, s.ids, s.logits = p0, s.ids[:p0], nil
	return s.Prefill(ctx, sp.buf[:n])
}
