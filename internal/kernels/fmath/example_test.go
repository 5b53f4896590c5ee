package fmath_test

import (
	"fmt"

	"github.com/k3-project/k3/internal/kernels/fmath"
)

// The model's sigmoid is defined through a float32 rounding of a float64
// exp, so it saturates to exactly 0 (never NaN) for very negative inputs.
func ExampleSigmoid32() {
	fmt.Println(fmath.Sigmoid32(0), fmath.Sigmoid32(-200), fmath.Sigmoid32(200))
	fmt.Println(fmath.Exp64(1), fmath.Tanh64(0.5))
	// Output:
	// 0.5 0 1
	// 2.718281828459045 0.46211715726000974
}
