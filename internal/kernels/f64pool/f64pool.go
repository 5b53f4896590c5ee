package f64pool

import "sync"

// pool holds *[]float64 rather than slices so Put does not allocate a
// fresh interface value for the slice header.
var pool = sync.Pool{New: func() any { return new([]float64) }}

// Get returns a buffer of length n (contents unspecified). Hand it back with
// Put once nothing refers to it any more.
func Get(n int) *[]float64 {
	p := pool.Get().(*[]float64)
	if cap(*p) < n {
		*p = make([]float64, n)
	}
	*p = (*p)[:n]
	return p
}

// Put returns a buffer obtained from Get to the pool.
func Put(p *[]float64) { pool.Put(p) }
