package k3

import (
	"errors"
	"fmt"
	"sync"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
	"github.com/k3-project/k3/trunk"
)

// weights is everything a forward pass asks of the storage behind the model's weights, whatever
// mix of mapped shards, trunk store and expert cache holds them: begin a pass, the pass's read
// error, the guard against memory faults, and the check a pass's result must pass.
type weights struct {
	sources []weightSource
	// mapped, when some weights are read through shard mappings, guards against their faults.
	mapped *safetensors.Checkpoint
	// serial: streamed dense weights go through one ring in walk order, and the expert cache's
	// leases are sized for one pass, so passes take turns.
	serial bool
	walk   sync.Mutex
	// watch holds the identity of every weight file opened (§7.7): checked before each pass and,
	// with its result, after.
	watch *storage.Watch
}

// weightSource is one storage behind some of the weights; each adapter below implements what
// its storage needs and leaves the rest as no-ops.
type weightSource interface {
	// begin readies the source for a pass.
	begin()
	// err is the first read failure of the pass: a streamed matrix that cannot read its bytes
	// computes NaN and records why here instead of failing the call it is in.
	err() error
}

func newWeights(ck *safetensors.Checkpoint, store *trunk.Store, experts *cache.Store, watch *storage.Watch) *weights {
	w := &weights{serial: store != nil || experts != nil, watch: watch}
	if store == nil || experts == nil {
		w.mapped = ck // guarded against faults; its changes are the watch's to find
	}
	if store != nil {
		w.sources = append(w.sources, trunkStore{store})
	}
	if experts != nil {
		w.sources = append(w.sources, expertCache{experts})
	}
	return w
}

// begin starts a pass; end must follow.
func (w *weights) begin() {
	if w.serial {
		w.walk.Lock()
	}
	for _, s := range w.sources {
		s.begin()
	}
}

// end ends the pass begin started.
func (w *weights) end() {
	if w.serial {
		w.walk.Unlock()
	}
}

// check returns a *storage.ChangedError when a weight file is no longer what the model opened.
func (w *weights) check() error { return w.watch.Check() }

// cause returns what made a pass fail with err: a weight file that changed under it, when one
// did (a short read, NaN weights or a router with no selectable expert are then symptoms, named
// after the change), else err.
func (w *weights) cause(err error) error {
	if cerr := w.check(); cerr != nil && !errors.Is(err, storage.ErrChanged) {
		return fmt.Errorf("%w (then: %v)", cerr, err)
	}
	return err
}

// err returns the pass's first read failure, if any.
func (w *weights) err() error {
	for _, s := range w.sources {
		if err := s.err(); err != nil {
			return err
		}
	}
	return nil
}

// guard runs fn, turning a memory fault on a mapped shard (a file truncated under the model)
// into an error naming the shard instead of a crash.
func (w *weights) guard(fn func() error) error {
	if w.mapped == nil {
		return fn()
	}
	var err error
	if gerr := w.mapped.Guard(func() { err = fn() }); gerr != nil {
		return gerr
	}
	return err
}

// settle returns the pass's read failure, or a file that changed during it: whatever was read
// may mix two files' bytes. A shard that shrank under its mapping by less than a page reads
// zeros instead of faulting; its identity (size included) catches that too.
func (w *weights) settle() error {
	if err := w.err(); err != nil {
		return err
	}
	return w.check()
}

// trunkStore is the budgeted dense-weight store.
type trunkStore struct{ s *trunk.Store }

func (t trunkStore) begin()     { t.s.ClearErr() }
func (t trunkStore) err() error { return t.s.Err() }

// expertCache is the routed-expert cache; its failures reach the pass through the MoE layers.
type expertCache struct{ s *cache.Store }

func (e expertCache) begin()   { e.s.BeginStep() }
func (expertCache) err() error { return nil }
