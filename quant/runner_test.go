package quant_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/stretchr/testify/require"
)

// randBF16 returns rows×cols bf16 weights with exponents that keep the products finite.
func randBF16(rng *rand.Rand, rows, cols int) []byte {
	w := make([]byte, 2*rows*cols)
	for i := 0; i < len(w); i += 2 {
		f := float32(rng.NormFloat64())
		binary.LittleEndian.PutUint16(w[i:], uint16(math.Float32bits(f)>>16))
	}
	return w
}

// A worker pool is a Runner.
var _ quant.Runner = (*parallel.Pool)(nil)

// TestSameBitsAsQuant: on the pool, mat-vecs and mat-muls give the kernels' bits, whatever the
// number of workers, and through the wrapper as well.
func TestSameBitsAsQuant(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := parallel.NewPool(3)
	defer p.Close()
	for _, shape := range [][2]int{{1, 16}, {37, 64}, {300, 1024}, {1024, 2048}} {
		rows, cols := shape[0], shape[1]
		m, err := quant.NewBF16(rows, cols, randBF16(rng, rows, cols))
		require.NoError(t, err)
		x := make([]float32, 5*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		want := make([]float32, rows)
		m.MatVec(want, x[:cols])
		wantMM := make([]float32, 5*rows)
		m.MatMul(wantMM, rows, x, 5)
		for _, workers := range []int{1, 2, 3, 8} {
			got := make([]float32, rows)
			quant.MatVecOn(p, m, got, x[:cols], workers)
			require.Equal(t, want, got, "%dx%d workers %d", rows, cols, workers)
			quant.MatVecParallel(quant.OnRunner(m, p), got, x[:cols], workers)
			require.Equal(t, want, got, "wrapped %dx%d workers %d", rows, cols, workers)
			gotMM := make([]float32, 5*rows)
			quant.MatMulOn(p, m, gotMM, rows, x, 5, workers)
			require.Equal(t, wantMM, gotMM, "mat-mul %dx%d workers %d", rows, cols, workers)
			quant.MatMulOn(nil, m, gotMM, rows, x, 5, workers)
			require.Equal(t, wantMM, gotMM, "nil pool %dx%d workers %d", rows, cols, workers)
		}
	}
}

// TestWrapKeepsRows: the wrapper still decodes rows, and nil pools or matrices pass through.
func TestWrapKeepsRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, err := quant.NewBF16(8, 32, randBF16(rng, 8, 32))
	require.NoError(t, err)
	p := parallel.NewPool(2)
	defer p.Close()
	w := quant.OnRunner(m, p)
	rd, ok := w.(quant.RowDecoder)
	require.True(t, ok)
	got, want := make([]float32, 32), make([]float32, 32)
	rd.DecodeRow(got, 5)
	m.(quant.RowDecoder).DecodeRow(want, 5)
	require.Equal(t, want, got)
	require.Equal(t, m, quant.OnRunner(m, nil))
	require.Nil(t, quant.OnRunner(nil, p))
}

// TestSplitAllocatesNothing: a split mat-vec and mat-mul on the pool allocate nothing once
// warm (the pool's job is reused, the task recycled, rows taken without views).
func TestSplitAllocatesNothing(t *testing.T) {
	if testkit.RaceEnabled {
		t.Skip("the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	m, err := quant.NewBF16(1024, 2048, randBF16(rng, 1024, 2048))
	require.NoError(t, err)
	p := parallel.NewPool(2)
	defer p.Close()
	x := make([]float32, 2*2048)
	dst := make([]float32, 2*1024)
	require.Greater(t, parallel.Chunks(1024, 2, max(16, parallel.Grain(2048))), 1, "the call must split")
	quant.MatVecOn(p, m, dst[:1024], x[:2048], 2)
	require.Zero(t, testing.AllocsPerRun(50, func() { quant.MatVecOn(p, m, dst[:1024], x[:2048], 2) }))
	require.Zero(t, testing.AllocsPerRun(50, func() { quant.MatMulOn(p, m, dst, 1024, x, 2, 2) }))
}
