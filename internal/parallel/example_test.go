package parallel_test

import (
	"fmt"

	"github.com/k3-project/k3/internal/parallel"
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
