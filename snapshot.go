package k3

import (
	"fmt"

	"github.com/k3-project/k3/attention"
)

// Snapshot is a deep copy of a Session's state (for speculative decoding, branching, or retrying
// after an error). Restoring it gives bit-identical continuations (§4.10). A Snapshot is
// immutable and may be restored any number of times, into any session of the same model: a
// session restored from a snapshot of s into m.NewSession() is an independent clone of s.
type Snapshot struct {
	m      *Model
	kda    []*attention.KDAState
	mla    []*attention.MLACache
	pos    int
	ids    []int
	logits []float32
}

// Snapshot captures the session's state. A session broken by a failed call cannot be captured.
func (s *Session) Snapshot() (*Snapshot, error) {
	if s.broken != nil {
		return nil, s.broken
	}
	sn := &Snapshot{m: s.m, kda: make([]*attention.KDAState, len(s.kda)), mla: make([]*attention.MLACache, len(s.mla)),
		pos: s.pos, ids: s.IDs(), logits: s.Logits()}
	for l := range s.kda {
		if s.kda[l] != nil {
			sn.kda[l] = s.kda[l].Clone()
		}
		if s.mla[l] != nil {
			sn.mla[l] = s.mla[l].Clone()
		}
	}
	return sn, nil
}

// Restore replaces the session's state with a copy of sn (clearing ErrBroken). A snapshot of
// another Model (even one opened from the same directory) is refused with a *StateError of
// Reason StateOtherModel, as LoadSession refuses another model's file.
func (s *Session) Restore(sn *Snapshot) error {
	if sn == nil {
		return &StateError{Reason: StateOtherModel, Offset: -1, detail: "nil snapshot"}
	}
	if sn.m != s.m {
		return &StateError{Reason: StateOtherModel, Offset: -1, detail: "the snapshot was taken from another Model"}
	}
	for l := range s.kda {
		if sn.kda[l] != nil {
			if err := s.kda[l].CopyFrom(sn.kda[l]); err != nil {
				return fmt.Errorf("k3: restore layer %d: %w", l, err)
			}
		}
		if sn.mla[l] != nil {
			if err := s.mla[l].CopyFrom(sn.mla[l]); err != nil {
				return fmt.Errorf("k3: restore layer %d: %w", l, err)
			}
		}
	}
	s.pos, s.broken = sn.pos, nil
	s.ids = append(s.ids[:0], sn.ids...)
	s.logbuf = append(s.logbuf[:0], sn.logits...) // s.logits is private: reuse its buffer
	s.logits = s.logbuf
	if sn.logits == nil {
		s.logits = nil
	}
	return nil
}
