package floatbits_test

import (
	"fmt"

	"github.com/k3-project/k3/internal/kernels/floatbits"
)

func Example() {
	fmt.Println(floatbits.BF16(0x3fc0), floatbits.F16(0x3c00), floatbits.F16(0x0001), floatbits.E4M3(0x7e))
	// Output: 1.5 1 5.9604645e-08 448
}
