package moe

import (
	"sync"

	"github.com/k3-project/k3/internal/kernels/arena"
)

// Workspace holds the scratch memory of MoE and Dense Forward calls, so that
// a steady decode loop allocates nothing of its own. Buffers grow on demand
// to the largest call seen and are reused afterwards.
//
// A Workspace is not safe for concurrent use: give each goroutine (for
// example each session) its own. One Workspace may be shared by every MoE
// and Dense layer a goroutine runs, because a call leaves nothing in it that
// a later call reads. Layers stay immutable; calls without a workspace
// borrow one from a pool owned by the layer.
type Workspace struct {
	f32   arena.Arena[float32]
	ints  arena.Arena[int]
	run   expertRun
	parts []expertPart
	order []int // the expert split's claiming order
	glu   gluSplit
	comb  combineSplit
	// experts is handed to ExpertSource.Experts as its destination;
	// waveBufs are the two destinations of overlapped waves, and next the
	// lease of the wave being read ahead.
	experts  []Expert
	waveBufs [2][]Expert
	next     waveFetch
}

// waveFetch is the outcome of leasing a wave on another goroutine; wg is
// done when the other fields are set.
type waveFetch struct {
	wg      sync.WaitGroup
	experts []Expert
	release func()
	err     error
}

// NewWorkspace returns an empty workspace.
func NewWorkspace() *Workspace { return new(Workspace) }

// Runner runs the splits of a call on worker goroutines the caller keeps, so that a layer
// starts none per call (the root package shares one set of workers among all layers). Run calls
// t.Run over disjoint ranges covering [0, n), each at least grain long, on at most workers
// goroutines, and returns when all are done; Limit reports how many of workers it would use.
// Results never depend on the Runner.
type Runner interface {
	Run(n, workers, grain int, t interface{ Run(lo, hi int) })
	Limit(workers int) int
}
