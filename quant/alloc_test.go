package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// TestSteadyStateNoAlloc: once the scratch pools are warm, MatVec, MatMul,
// DecodeRow and the parallel helpers on one worker allocate nothing, for
// every format (a decode step makes hundreds of these calls).
func TestSteadyStateNoAlloc(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, cols, n = 48, 256, 3
	for _, c := range allCases() {
		m, _, _ := randomBytesMatrix(t, rng, c, rows, cols, true)
		x := randFloats(rng, n*cols)
		dst := make([]float32, n*rows)
		row := make([]float32, cols)
		calls := map[string]func(){
			"MatVec":         func() { m.MatVec(dst[:rows], x[:cols]) },
			"MatMul":         func() { m.MatMul(dst, rows, x, n) },
			"MatVecParallel": func() { MatVecParallel(m, dst[:rows], x[:cols], 2) },
			"MatMulParallel": func() { MatMulParallel(m, dst, rows, x, n, 2) },
			"DecodeRow":      func() { m.(RowDecoder).DecodeRow(row, rows-1) },
		}
		for name, f := range calls {
			testkit.NoAllocs(t, fmt.Sprintf("%v %s", c, name), 50, f)
		}
	}
}
