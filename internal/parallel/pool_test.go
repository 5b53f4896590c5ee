package parallel

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spans runs run over n and returns the chunks it made, sorted, after checking each index ran
// exactly once.
func spans(t *testing.T, n int, run func(fn func(lo, hi int))) []span {
	t.Helper()
	var mu sync.Mutex
	var got []span
	hits := make([]int32, n)
	run(func(lo, hi int) {
		for i := lo; i < hi; i++ {
			atomic.AddInt32(&hits[i], 1)
		}
		mu.Lock()
		got = append(got, span{lo, hi})
		mu.Unlock()
	})
	for i, h := range hits {
		require.EqualValues(t, 1, h, "index %d of %d", i, n)
	}
	slices.SortFunc(got, func(a, b span) int { return a.lo - b.lo })
	return got
}

// TestPoolChunksAreFors: for the same arguments the pool makes exactly the chunks For makes
// (callers such as MLA's heads index per-chunk scratch by a chunk's lo).
func TestPoolChunksAreFors(t *testing.T) {
	for _, size := range []int{2, 3, 5} {
		p := NewPool(size)
		for n := 0; n <= 70; n += 7 {
			for workers := 0; workers <= 6; workers++ {
				for _, grain := range []int{0, 1, 4, 16} {
					want := spans(t, n, func(fn func(lo, hi int)) { For(n, min(workers, size), grain, fn) })
					got := spans(t, n, func(fn func(lo, hi int)) { p.For(n, workers, grain, fn) })
					require.Equal(t, want, got, "pool of %d: n=%d workers=%d grain=%d", size, n, workers, grain)
				}
			}
		}
		p.Close()
	}
}

// TestPoolUsesHelpers: with two chunks of real work, the helper takes one (the pool is not
// running everything on the caller).
func TestPoolUsesHelpers(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var helped atomic.Bool
	caller := goid()
	for range 50 {
		p.For(2, 2, 1, func(lo, hi int) {
			if goid() != caller {
				helped.Store(true)
			}
			time.Sleep(200 * time.Microsecond)
		})
	}
	assert.True(t, helped.Load(), "no chunk ran on a helper in 50 calls")
}

// goid identifies the calling goroutine by its stack header, for tests only.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	for i, c := range b[len("goroutine "):] {
		if c == ' ' {
			return string(b[:len("goroutine ")+i])
		}
	}
	return string(b)
}

// TestPoolPanic: a chunk's panic comes back on the caller once every chunk has returned.
func TestPoolPanic(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	for range 20 {
		var finished atomic.Int32
		got := func() (r any) {
			defer func() { r = recover() }()
			p.For(64, 2, 1, func(lo, hi int) {
				if lo == 0 {
					panic("chunk 0")
				}
				time.Sleep(100 * time.Microsecond)
				finished.Add(1)
			})
			return nil
		}()
		assert.Equal(t, "chunk 0", got)
		assert.EqualValues(t, 1, finished.Load(), "the other chunk must finish before the panic returns")
	}
	// The pool still works after a panic.
	assert.Len(t, spans(t, 100, func(fn func(lo, hi int)) { p.For(100, 2, 1, fn) }), 2)
}

// TestPoolConcurrentCalls: calls from several goroutines at once (two sessions of one model)
// all complete correctly; all but one run through For.
func TestPoolConcurrentCalls(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := 1 + (g*31+i*7)%97
				out := make([]int, n)
				p.For(n, 3, 1, func(lo, hi int) {
					for r := lo; r < hi; r++ {
						out[r] += r + 1
					}
				})
				for r, v := range out {
					if v != r+1 {
						t.Errorf("n=%d: out[%d]=%d", n, r, v)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestPoolNilAndClose: a nil pool runs through For; Close stops the helpers.
func TestPoolNilAndClose(t *testing.T) {
	var nilPool *Pool
	assert.Equal(t, 1, nilPool.Workers())
	assert.Len(t, spans(t, 10, func(fn func(lo, hi int)) { nilPool.For(10, 2, 1, fn) }), 2)
	nilPool.Close()
	assert.Nil(t, NewPool(1))

	before := runtime.NumGoroutine()
	p := NewPool(4)
	assert.Equal(t, 4, p.Workers())
	p.For(8, 4, 1, func(lo, hi int) {})
	p.Close()
	// A helper has called Done but may not have returned yet: poll (testify's Eventually
	// would add goroutines of its own to the count).
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "helpers still running after Close")
}

// BenchmarkPoolVsFor: back-to-back calls of two 50 µs chunks, with a short serial gap between
// them, as in a decode step. For pays a thread wake-up per call; the pool's helpers are awake.
func BenchmarkPoolVsFor(b *testing.B) {
	work := func(lo, hi int) {
		for t0 := time.Now(); time.Since(t0) < 50*time.Microsecond; {
		}
	}
	gap := func() {
		for t0 := time.Now(); time.Since(t0) < 5*time.Microsecond; {
		}
	}
	b.Run("for", func(b *testing.B) {
		for b.Loop() {
			gap()
			For(2, 2, 1, work)
		}
	})
	b.Run("pool", func(b *testing.B) {
		p := NewPool(2)
		defer p.Close()
		for b.Loop() {
			gap()
			p.For(2, 2, 1, work)
		}
	})
}
