package attention

import (
	"github.com/k3-project/k3/internal/kernels/arena"
	"github.com/k3-project/k3/internal/kernels/nn"
)

// Workspace holds the scratch memory of KDA and MLA Forward calls, so that a
// steady decode loop allocates nothing. Buffers grow on demand to the
// largest call seen and are reused afterwards.
//
// A Workspace is not safe for concurrent use: give each goroutine (for
// example each session) its own. One Workspace may be shared by every layer
// a goroutine runs, KDA and MLA alike, because a call leaves nothing in it
// that a later call reads. Layers themselves stay immutable; Forward without
// a workspace borrows one from a pool owned by the layer.
type Workspace struct {
	f32 arena.Arena[float32]
	f64 arena.Arena[float64]
	mla mlaCall
	// The sequences of an MLA call: one for ForwardWith, kept for ForwardBatch.
	mlaOne  [1]mlaSeg
	mlaSegs []mlaSeg
	kda     kdaCall
	// The sequences of a KDA call: one for ForwardWith, kept for ForwardBatch.
	kdaOne  [1]kdaSeg
	kdaSegs []kdaSeg
	conv    nn.ConvCall
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
