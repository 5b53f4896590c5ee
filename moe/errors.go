package moe

import "errors"

// ErrTooFewSelectable reports a router row with fewer than k selectable
// (non-NaN) experts; the layer fails rather than use a silent zero weight.
var ErrTooFewSelectable = errors.New("moe: fewer selectable experts than top-k")
