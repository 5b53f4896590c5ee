package nn_test

import (
	"fmt"

	"github.com/k3-project/k3/internal/kernels/nn"
)

// One decoder layer's residual wiring with trivial mixers: a boundary layer
// pushes its input as a block, and its output restarts the partial sum.
func ExampleResidual() {
	const T, E = 1, 4
	ones := []float32{1, 1, 1, 1}
	agg := func() *nn.AttnRes {
		a, err := nn.NewAttnRes(ones, []float32{0.5, -0.5, 0.25, 0}, 1e-5)
		if err != nil {
			panic(err)
		}
		return a
	}
	layer := &nn.Residual{InputNorm: nn.F32(ones), PostNorm: nn.F32(ones), AttnRes: agg(), MLPRes: agg(), Eps: 1e-5, Boundary: true}
	s, err := nn.NewStream([]float32{1, 2, 3, 4}, T, E) // the token embedding
	if err != nil {
		fmt.Println(err)
		return
	}
	constant := func(v float32) nn.Mixer {
		return func(dst, x []float32, T, _ int) error {
			for i := range dst {
				dst[i] = v
			}
			return nil
		}
	}
	if err := layer.Forward(s, constant(0.5), constant(0.25), 1); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("blocks:", len(s.Blocks), "first block:", s.Blocks[0], "h:", s.H)
	// Output:
	// blocks: 1 first block: [1 2 3 4] h: [0.75 0.75 0.75 0.75]
}
