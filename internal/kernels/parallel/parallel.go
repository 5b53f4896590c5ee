package parallel

import (
	"runtime/debug"
	"sync"
)

// MinWork is the fewest multiply-adds (or comparable float operations) a
// chunk should hold to be worth its own goroutine. Starting one is cheap,
// but its work lands on a worker thread that is usually parked, and waking
// it costs tens of microseconds on the small VMs the engine was tuned on: a
// 1024×512 bf16 mat-vec (512 Ki multiply-adds, about 90 µs) only breaks even
// on two goroutines, smaller ones lose up to 2×, 2048×2048 gains 25–35 %.
const MinWork = 256 << 10

// Grain returns the grain for For over items of unit operations each: the
// fewest items that hold MinWork (at least 1). Callers pass it so that small
// problems, such as the fixture models with hidden size 128, run inline.
func Grain(unit int) int { return GrainFor(unit, MinWork) }

// GrainFor is Grain with minWork in place of MinWork; tests pass 1 to force
// the split of problems too small to be split otherwise.
func GrainFor(unit, minWork int) int {
	if unit <= 0 {
		return 1
	}
	return max(1, (minWork+unit-1)/unit)
}

// For runs fn over [0, n) split into contiguous chunks [lo, hi) on up to
// workers goroutines, and returns when all calls have returned.
//
// The number of chunks is k = min(workers, n/grain) (at least 1), and chunk i
// is [i·n/k, (i+1)·n/k): chunk sizes differ by at most one and every chunk
// holds at least grain indices, so grain is the smallest piece of work worth a
// goroutine. With workers <= 1, or n < 2·grain, fn(0, n) runs inline on the
// calling goroutine. The boundaries depend only on (n, workers, grain). The
// last chunk runs on the calling goroutine. grain < 1 is treated as 1;
// n <= 0 calls nothing.
//
// A panic in fn on another goroutine is carried back and re-raised on the
// calling goroutine once every chunk has returned, so a caller that recovers
// (safetensors.Checkpoint.Guard turning a fault on a truncated mapping into an
// error) sees it; the workers run with debug.SetPanicOnFault so a memory fault
// there is such a panic, not a crash.
func For(n, workers, grain int, fn func(lo, hi int)) {
	k := Chunks(n, workers, grain)
	switch k {
	case 0:
		return
	case 1:
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	var once sync.Once
	var pv any
	wg.Add(k - 1)
	for i := range k - 1 {
		lo, hi := Bounds(n, k, i)
		go func() {
			defer wg.Done()
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					once.Do(func() { pv = r })
				}
			}()
			fn(lo, hi)
		}()
	}
	lo, hi := Bounds(n, k, k-1)
	func() {
		// Wait for the workers even when the caller's own chunk panics, so none outlives the
		// call and writes into memory the caller has moved on from.
		defer wg.Wait()
		fn(lo, hi)
	}()
	if pv != nil {
		panic(pv)
	}
}

// Chunks returns the number of chunks For(n, workers, grain, ·) uses: 0 when
// n <= 0, otherwise min(workers, n/grain) clamped to at least 1.
func Chunks(n, workers, grain int) int {
	if n <= 0 {
		return 0
	}
	if grain < 1 {
		grain = 1
	}
	k := min(workers, n/grain)
	return max(k, 1)
}

// Bounds returns chunk i of n indices split into k chunks: [i·n/k, (i+1)·n/k).
// It requires 0 <= i < k and n >= 0.
func Bounds(n, k, i int) (lo, hi int) {
	return i * n / k, (i + 1) * n / k
}
