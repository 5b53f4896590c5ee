package k3

import (
	"errors"
	"fmt"
	"strings"

	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrClosed: the model was closed; its weights (mmap views) are gone.
	ErrClosed = errors.New("k3: model is closed")
	// ErrNoLogits: a pick was asked for before any position was processed.
	ErrNoLogits = errors.New("k3: no logits yet (prefill at least one position first)")
	// ErrEmptyInput: a call that needs at least one token id got none.
	ErrEmptyInput = errors.New("k3: no token ids")
	// ErrContextFull: a prompt does not fit in GenerateOptions.MaxContext.
	ErrContextFull = errors.New("k3: context length exceeded")
	// ErrBroken: an earlier call failed or was cancelled part-way through the layers, so the
	// session's carried state is inconsistent. Restore a snapshot or Reset to continue.
	ErrBroken = errors.New("k3: session state is inconsistent after a failed or cancelled call")
	// ErrState: LoadSession refused a state file, or Restore a snapshot; the error is a
	// *StateError saying why.
	ErrState = errors.New("k3: saved session state refused")
)

// StateReason says why a saved session state was refused; a StateError's message spells it out.
type StateReason int

// The reasons of a StateError.
const (
	StateBadMagic       StateReason = iota + 1 // the file does not start with "K3ST"
	StateBadVersion                            // a K3ST version other than StateVersion
	StateBadChecksum                           // a CRC-32C differs: the header or body is corrupted
	StateOtherModel                            // another model's state, or a Snapshot of another Model
	StateOtherCacheForm                        // a cache layout this engine does not run
	StateCorrupt                               // impossible values under a valid checksum
	StateTruncated                             // the file ends before the data it declares
)

var stateReasons = [...]string{
	StateBadMagic:       "not a K3ST state file (bad magic)",
	StateBadVersion:     "unsupported K3ST state file version",
	StateBadChecksum:    "state file checksum mismatch (corrupted)",
	StateOtherModel:     "state belongs to another model",
	StateOtherCacheForm: "state file holds a cache form this engine does not run",
	StateCorrupt:        "state file holds inconsistent values",
	StateTruncated:      "state file is truncated",
}

// StateError reports a saved session state that LoadSession or Restore refused. It matches
// ErrState with errors.Is.
type StateError struct {
	Reason StateReason
	// Offset is the byte offset in the file of the field at fault: where the file ended for
	// StateTruncated, the stored checksum for StateBadChecksum. It is -1 for a Snapshot.
	Offset int64
	detail string // what was found, for people; callers branch on Reason and Offset
}

func (e *StateError) Error() string {
	var b strings.Builder
	b.WriteString("k3: ")
	if e.Reason > 0 && int(e.Reason) < len(stateReasons) {
		b.WriteString(stateReasons[e.Reason])
	} else {
		fmt.Fprintf(&b, "saved state refused (reason %d)", int(e.Reason))
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " at byte %d", e.Offset)
	}
	if e.detail != "" {
		b.WriteString(": ")
		b.WriteString(e.detail)
	}
	return b.String()
}

// Is reports whether target is ErrState.
func (e *StateError) Is(target error) bool { return target == ErrState }

// TokenError reports a token id outside [0, Vocab) (§4.2: an error, never clamped).
type TokenError struct {
	Pos   int // index of the id in the call's input
	ID    int
	Vocab int
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("k3: token id %d at input position %d is outside [0, %d)", e.ID, e.Pos, e.Vocab)
}

// BindError lists every model tensor the checkpoint lacks or holds with a wrong dtype or shape
// (§3.3, §3.4). Binding collects all problems before refusing, so one run names them all.
type BindError struct {
	Dir     string
	Missing []MissingTensor
	// Mismatched: one entry per present tensor whose dtype or shape is not acceptable, with what
	// was found and what is accepted.
	Mismatched []string
}

// MissingTensor is a tensor of the model the checkpoint lacks.
type MissingTensor struct {
	Name string
	// Shard is the shard file the checkpoint's index says should hold the tensor ("" without
	// an index entry), and State why it does not.
	Shard string
	State safetensors.ShardState
	// Packed is the packed trunk's layout file when the tensor was looked for there.
	Packed string
}

func (mt MissingTensor) line() string {
	switch {
	case mt.Packed != "":
		return mt.Name + " (not in " + mt.Packed + ")"
	case mt.Shard != "":
		return fmt.Sprintf("%s (index: shard %s, %v)", mt.Name, mt.Shard, mt.State)
	}
	return mt.Name
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

// groupMissing folds the missing tensors that the index places in the same shard into one line
// per shard, at the shard's first position, so one absent shard is one line, not one per tensor.
func groupMissing(missing []MissingTensor) []string {
	type shard struct {
		name  string
		state safetensors.ShardState
	}
	count := map[shard]int{}
	for _, mt := range missing {
		if mt.Shard != "" && mt.Packed == "" {
			count[shard{mt.Shard, mt.State}]++
		}
	}
	var out []string
	seen := map[shard]bool{}
	for _, mt := range missing {
		k := shard{mt.Shard, mt.State}
		n := count[k]
		switch {
		case n <= 1 || mt.Packed != "":
			out = append(out, mt.line())
		case !seen[k]:
			seen[k] = true
			out = append(out, fmt.Sprintf("%d tensors the index places in shard %s (%v), the first %s", n, mt.Shard, mt.State, mt.Name))
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
		if errors.Is(e.Err, storage.ErrChanged) {
			// Found by the checks around the pass (§7.7), not by a layer.
			return fmt.Sprintf("k3: forward: %v", e.Err)
		}
		return fmt.Sprintf("k3: forward (output head): %v", e.Err)
	}
	return fmt.Sprintf("k3: forward, layer %d: %v", e.Layer, e.Err)
}

func (e *ForwardError) Unwrap() error { return e.Err }
