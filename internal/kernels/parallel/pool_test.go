package parallel

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
		if h != 1 {
			t.Fatalf("index %d of %d ran %d times", i, n, h)
		}
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
					if !slices.Equal(got, want) {
						t.Fatalf("pool of %d: n=%d workers=%d grain=%d: chunks %v, For's %v", size, n, workers, grain, got, want)
					}
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
	if !helped.Load() {
		t.Error("no chunk ran on a helper in 50 calls")
	}
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
		if got != "chunk 0" {
			t.Errorf("recovered %v, want chunk 0", got)
		}
		if n := finished.Load(); n != 1 {
			t.Errorf("%d other chunks finished before the panic returned, want 1", n)
		}
	}
	// The pool still works after a panic.
	if s := spans(t, 100, func(fn func(lo, hi int)) { p.For(100, 2, 1, fn) }); len(s) != 2 {
		t.Errorf("after a panic: chunks %v, want 2", s)
	}
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
	if w := nilPool.Workers(); w != 1 {
		t.Errorf("a nil pool has %d workers, want 1", w)
	}
	if s := spans(t, 10, func(fn func(lo, hi int)) { nilPool.For(10, 2, 1, fn) }); len(s) != 2 {
		t.Errorf("nil pool: chunks %v, want 2", s)
	}
	nilPool.Close()
	if p := NewPool(1); p != nil {
		t.Error("NewPool(1) is not nil: one worker needs no helpers")
	}

	before := runtime.NumGoroutine()
	p := NewPool(4)
	if w := p.Workers(); w != 4 {
		t.Errorf("NewPool(4) has %d workers", w)
	}
	p.For(8, 4, 1, func(lo, hi int) {})
	p.Close()
	// A helper has called Done but may not have returned yet: poll (testify's Eventually
	// would add goroutines of its own to the count).
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before: helpers still running", n, before)
	}
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
