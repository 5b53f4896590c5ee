package testkit_test

import (
	"fmt"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// A kernel benchmark paired with the read loop over the same bytes; in a
// _test.go file the body of the func literal is the benchmark function.
func ExamplePaired() {
	weights := testkit.Filled(8 << 20)
	res := testing.Benchmark(func(b *testing.B) {
		var sum byte
		testkit.Paired(b, weights, 1, func() {
			for _, v := range weights { // stand-in for a real kernel
				sum += v
			}
		})
		_ = sum
	})
	fmt.Println(res.Extra["x-read"] > 0)
	// Output: true
}
