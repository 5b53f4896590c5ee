package moe

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
	f32   arena[float32]
	ints  arena[int]
	run   expertRun
	parts []expertPart
}

// NewWorkspace returns an empty workspace.
func NewWorkspace() *Workspace { return new(Workspace) }

// arena hands out consecutive, non-overlapping slices of one buffer. reset
// sizes the buffer for a whole call before anything is taken, so taken
// slices never move.
type arena[T float32 | int] struct {
	buf []T
	off int
}

func (a *arena[T]) reset(n int) {
	if cap(a.buf) < n {
		a.buf = make([]T, n)
	}
	a.buf = a.buf[:n]
	a.off = 0
}

// take returns the next n elements; their contents are unspecified.
func (a *arena[T]) take(n int) []T {
	s := a.buf[a.off : a.off+n : a.off+n]
	a.off += n
	return s
}
