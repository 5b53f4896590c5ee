package f64pool

import (
	"runtime"
	"sync"
	"testing"
)

func TestGetLength(t *testing.T) {
	for _, n := range []int{0, 1, 7, 4096, 3} {
		p := Get(n)
		if len(*p) != n {
			t.Fatalf("Get(%d): len %d", n, len(*p))
		}
		Put(p)
	}
}

// TestExclusive checks that buffers held at the same time never alias, on
// many goroutines, so concurrent kernels cannot see each other's data.
func TestExclusive(t *testing.T) {
	const workers, rounds, n = 8, 200, 64
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				p := Get(n)
				v := float64(w*rounds + r)
				for i := range *p {
					(*p)[i] = v
				}
				runtime.Gosched() // let another goroutine Get while this one holds p
				for _, x := range *p {
					if x != v {
						errs <- "buffer shared between goroutines"
						return
					}
				}
				Put(p)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

func TestSteadyStateNoAlloc(t *testing.T) {
	Put(Get(1024))
	allocs := testing.AllocsPerRun(100, func() { Put(Get(1024)) })
	// The pool may drop buffers at a GC; on average a cycle reuses one.
	if allocs > 0.5 {
		t.Fatalf("Get/Put allocates %.2f times per cycle", allocs)
	}
}
