package moe

import (
	"errors"
	"fmt"
)

// ErrTooFewSelectable reports a router row with fewer than k selectable
// (non-NaN) experts; the layer fails rather than use a silent zero weight.
var ErrTooFewSelectable = errors.New("moe: fewer selectable experts than top-k")

// ExpertLoadError reports a routed expert that could not be obtained from the
// ExpertSource; the forward pass fails instead of skipping it (SPEC §4.8).
type ExpertLoadError struct {
	Layer  int
	Expert int
	Err    error
}

// Error names the layer and expert and includes the cause.
func (e *ExpertLoadError) Error() string {
	return fmt.Sprintf("moe: layer %d: loading expert %d: %v", e.Layer, e.Expert, e.Err)
}

// Unwrap returns the underlying error.
func (e *ExpertLoadError) Unwrap() error { return e.Err }
