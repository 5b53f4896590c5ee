package trunk

import (
	"errors"
	"fmt"
)

// Sentinel errors; the errors returned wrap them with the layer, tensor and offset involved.
var (
	// ErrBudget reports a budget below the smallest one that can run; the message gives the minimum.
	ErrBudget = errors.New("trunk: budget below the minimum")
	// ErrTensor reports a tensor description the store cannot serve.
	ErrTensor = errors.New("trunk: unusable tensor")
	// ErrLayout reports a trunk.json that violates §8.3.
	ErrLayout = errors.New("trunk: invalid trunk.json")
	// ErrChecksum reports a packed layer whose bytes do not match the sha256 in trunk.json.
	ErrChecksum = errors.New("trunk: layer checksum mismatch")
	// ErrRingExhausted reports that every ring slot was leased when another piece was needed; the
	// layer math holds at most one piece at a time, so this is a programming error, never a hang.
	ErrRingExhausted = errors.New("trunk: every ring slot is leased")
	// ErrClosed reports use of a closed Store.
	ErrClosed = errors.New("trunk: store is closed")
	// ErrIncomplete reports a pack whose output lacks trunk.json (interrupted or still running).
	ErrIncomplete = errors.New("trunk: packed trunk is incomplete")
)

// ReadError is a failed or short read of streamed or pinned weights. No bytes of a failed read
// are ever served.
type ReadError struct {
	Item   int    // layer, Head or Embed
	Tensor string // tensor (and row range) being read
	File   string
	Offset int64
	Len    int64
	Err    error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("trunk: read %s (%s) [%d, +%d) of %s: %v", e.Tensor, itemName(e.Item), e.Offset, e.Len, e.File, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

func itemName(i int) string {
	switch i {
	case Head:
		return "lm_head"
	case Embed:
		return "embedding"
	}
	return fmt.Sprintf("layer %d", i)
}

// LayerError is one problem (*Packed).Verify found in a packed layer: its checksum, a malformed
// block, a header that disagrees with trunk.json. Verify joins one per problem, so a caller can
// report each under its layer without reading the text.
type LayerError struct {
	Layer int   // the layer, or Embed or Head for the embedding's and the head's runs
	Err   error // the problem, whose text names the layer, tensor and place
}

func (e *LayerError) Error() string { return e.Err.Error() }
func (e *LayerError) Unwrap() error { return e.Err }
