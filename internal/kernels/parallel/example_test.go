package parallel_test

import (
	"fmt"

	"github.com/k3-project/k3/internal/kernels/parallel"
)

// Rows of an output split across two goroutines: each chunk writes only its
// own rows, so the result does not depend on scheduling.
func ExampleFor() {
	out := make([]int, 10)
	parallel.For(len(out), 2, 4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			out[r] = r * r
		}
	})
	fmt.Println(out)
	// Output: [0 1 4 9 16 25 36 49 64 81]
}

// A pool's helpers stay awake between calls, so a run of calls such as the mat-vecs of a
// decode step does not pay a thread wake-up each; the chunks are those For would make.
func ExamplePool() {
	p := parallel.NewPool(2)
	defer p.Close()
	out := make([]int, 10)
	for pass := 1; pass <= 3; pass++ {
		p.For(len(out), 2, 4, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				out[r] += pass * r
			}
		})
	}
	fmt.Println(out)
	// Output: [0 6 12 18 24 30 36 42 48 54]
}
