package k3

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrClosed: the model was closed; its weights (mmap views) are gone.
	ErrClosed = errors.New("k3: model is closed")
	// ErrNoLogits: Logits or a greedy pick was asked for before any position was processed.
	ErrNoLogits = errors.New("k3: no logits yet (prefill at least one position first)")
	// ErrAllNaN: every logit is NaN, so greedy decoding has nothing to pick.
	ErrAllNaN = errors.New("k3: every logit is NaN")
	// ErrEmptyInput: a call that needs at least one token id got none.
	ErrEmptyInput = errors.New("k3: no token ids")
	// ErrForeignSnapshot: Restore was given a snapshot of another model's session.
	ErrForeignSnapshot = errors.New("k3: snapshot belongs to another model")
)

// TokenError reports a token id outside [0, Vocab) (SPEC §4.2: an error, never clamped).
type TokenError struct {
	Pos   int // index of the id in the call's input
	ID    int
	Vocab int
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("k3: token id %d at input position %d is outside [0, %d)", e.ID, e.Pos, e.Vocab)
}

// BindError lists every model tensor the checkpoint lacks or holds with a wrong dtype or shape
// (SPEC §3.3, §3.4). Binding collects all problems before refusing, so one run names them all.
type BindError struct {
	Dir string
	// Missing: one entry per absent tensor: its name and, when the checkpoint has an index, the
	// shard the index says should hold it and why it is not there.
	Missing []string
	// Mismatched: one entry per present tensor whose dtype or shape is not acceptable, with what
	// was found and what is accepted.
	Mismatched []string
}

func (e *BindError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "k3: cannot bind the checkpoint in %s: %d tensor(s) missing, %d mis-typed or mis-shaped",
		e.Dir, len(e.Missing), len(e.Mismatched))
	const show = 40 // a K3 shard missing holds thousands of tensors; the fields keep the full lists
	list := func(title string, items []string) {
		for i, s := range items {
			if i == show {
				fmt.Fprintf(&b, "\n  ... and %d more %s", len(items)-show, title)
				break
			}
			fmt.Fprintf(&b, "\n  %s: %s", title, s)
		}
	}
	list("missing", groupMissing(e.Missing))
	list("mismatched", e.Mismatched)
	return b.String()
}

// groupMissing folds the missing tensors that the index places in the same shard (entries
// "name (index: shard S, state)") into one line per shard, so one absent shard is one line, not
// one per tensor. Entries without a shard are kept as they are.
func groupMissing(missing []string) []string {
	const mark = " (index: shard "
	type group struct {
		first string
		n     int
	}
	var order []string
	groups := map[string]*group{}
	var out []string
	for _, s := range missing {
		i := strings.LastIndex(s, mark)
		if i < 0 || !strings.HasSuffix(s, ")") {
			out = append(out, s)
			continue
		}
		key := s[i+len(mark) : len(s)-1]
		g := groups[key]
		if g == nil {
			g = &group{first: s[:i]}
			groups[key] = g
			order = append(order, key)
			out = append(out, "") // placeholder keeps the shard's first position
		}
		g.n++
	}
	k := 0
	for j, s := range out {
		if s != "" {
			continue
		}
		key := order[k]
		k++
		g := groups[key]
		shard, state, _ := strings.Cut(key, ", ")
		if g.n == 1 {
			out[j] = fmt.Sprintf("%s (index: shard %s, %s)", g.first, shard, state)
		} else {
			out[j] = fmt.Sprintf("%d tensors the index places in shard %s (%s), the first %s", g.n, shard, state, g.first)
		}
	}
	return out
}

// ForwardError wraps a failure inside a layer during a forward pass.
type ForwardError struct {
	Layer int // zero-based decoder layer, or -1 for the model-level head
	Err   error
}

func (e *ForwardError) Error() string {
	if e.Layer < 0 {
		return fmt.Sprintf("k3: forward (output head): %v", e.Err)
	}
	return fmt.Sprintf("k3: forward, layer %d: %v", e.Layer, e.Err)
}

func (e *ForwardError) Unwrap() error { return e.Err }
