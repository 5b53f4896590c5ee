package cache

import "fmt"

// ExpertLoadError reports a routed expert the store could not provide: a failed or short read,
// a corrupt coded record, an unknown layer or expert, a closed store. The forward pass fails with
// it instead of skipping the expert (§4.8). Expert is −1 when the failure is not one expert's.
type ExpertLoadError struct {
	Layer  int
	Expert int
	Err    error
}

func (e *ExpertLoadError) Error() string {
	return fmt.Sprintf("cache: layer %d: loading expert %d: %v", e.Layer, e.Expert, e.Err)
}

func (e *ExpertLoadError) Unwrap() error { return e.Err }
