package arena

// Arena hands out consecutive, non-overlapping slices of one buffer. Reset
// sizes the buffer for a whole call before anything is taken, so taken
// slices never move while the call runs. The zero value is an empty arena.
// An Arena is not safe for concurrent use.
type Arena[T any] struct {
	buf []T
	off int
}

// Reset makes room for n elements in all and forgets what was taken before;
// the buffer grows only when n exceeds its capacity, and earlier slices are
// reused (and may be overwritten) by later Takes.
func (a *Arena[T]) Reset(n int) {
	if cap(a.buf) < n {
		a.buf = make([]T, n)
	}
	a.buf = a.buf[:n]
	a.off = 0
}

// Take returns the next n elements, with capacity n so that an append cannot
// spill into the next slice; their contents are unspecified. Taking more than
// the last Reset provided is a programming error and panics.
func (a *Arena[T]) Take(n int) []T {
	s := a.buf[a.off : a.off+n : a.off+n]
	a.off += n
	return s
}
