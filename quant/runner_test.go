package quant_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/lossless12"
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

// cancellingBF16 draws bf16 weights and n activation rows on which a change
// of the R16 partition or tree changes the result: x is constant over each
// 16-element stripe and each stripe of a row holds huge weights (2^30–2^40
// times the rest) with their negations in other lanes, which cancel only
// where the tree combines those lanes. Zeros, subnormals and tiny weights
// escape their windows.
func cancellingBF16(r *rand.Rand, rows, cols, n int) ([]byte, []float32) {
	w := make([]byte, 2*rows*cols)
	code := func(i int) uint16 { return binary.LittleEndian.Uint16(w[2*i:]) }
	set := func(i int, c uint16) { binary.LittleEndian.PutUint16(w[2*i:], c) }
	for i := range rows * cols {
		c := uint16(math.Float32bits(float32(r.NormFloat64()*0.02)) >> 16)
		if r.IntN(40) == 0 {
			c &= 0x807F
		}
		set(i, c)
	}
	m := cols &^ 15
	for row := range rows {
		for s := 0; s < m; s += 16 {
			i, j := row*cols+s+r.IntN(16), row*cols+s+r.IntN(16)
			if i != j {
				set(i, uint16(r.IntN(2))<<15|uint16(157+r.IntN(11))<<7|uint16(r.IntN(128)))
				set(j, code(i)^0x8000)
			}
		}
	}
	x := make([]float32, n*cols)
	for i := range x {
		if c := i % cols; c < m && c%16 > 0 {
			x[i] = x[i-1]
		} else {
			x[i] = float32(r.NormFloat64())
		}
	}
	return w, x
}

func encodeLossless(t *testing.T, rows, cols int, w []byte) (quant.Matrix, []byte) {
	t.Helper()
	enc, err := lossless12.Encode(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := lossless12.EscapesForSize(rows, cols, int64(len(enc)))
	if !ok {
		t.Fatalf("EscapesForSize refuses the encoder's %d bytes", len(enc))
	}
	f, gs, err := quant.Resolve("w", rows, cols, quant.TensorDesc{DType: "U8", NBytes: int64(len(enc))}, nil, "lossless12")
	if err != nil || f != quant.Lossless12 || gs != e {
		t.Fatalf("Resolve = %v, %d, %v; want lossless12 with %d escape bytes", f, gs, err, e)
	}
	m, err := quant.New(f, rows, cols, gs, enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, enc
}

// TestLossless12SameBitsAsBF16: on the same weights, a lossless12 matrix
// gives the bf16 matrix's bits for MatVec, MatMul, row ranges and every
// worker count, on a pool and without one.
func TestLossless12SameBitsAsBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 1))
	p := parallel.NewPool(3)
	defer p.Close()
	for _, sh := range [][2]int{{1, 16}, {37, 100}, {300, 1024}, {513, 2048}} {
		rows, cols := sh[0], sh[1]
		const n = 5
		w, x := cancellingBF16(r, rows, cols, n)
		ref, err := quant.NewBF16(rows, cols, w)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := encodeLossless(t, rows, cols, w)
		want, wantMM := make([]float32, rows), make([]float32, n*rows)
		ref.MatVec(want, x[:cols])
		ref.MatMul(wantMM, rows, x, n)
		got, gotMM := make([]float32, rows), make([]float32, n*rows)
		name := fmt.Sprintf("[%d,%d]", rows, cols)
		m.MatVec(got, x[:cols])
		testkit.RequireSameBits(t, name+" MatVec", got, want)
		m.MatMul(gotMM, rows, x, n)
		testkit.RequireSameBits(t, name+" MatMul", gotMM, wantMM)
		for _, workers := range []int{1, 2, 3, 8} {
			clear(got)
			quant.MatVecParallel(m, got, x[:cols], workers)
			testkit.RequireSameBits(t, fmt.Sprintf("%s MatVecParallel %d", name, workers), got, want)
			clear(got)
			quant.MatVecOn(p, m, got, x[:cols], workers)
			testkit.RequireSameBits(t, fmt.Sprintf("%s MatVecOn %d", name, workers), got, want)
			clear(gotMM)
			quant.MatMulOn(p, m, gotMM, rows, x, n, workers)
			testkit.RequireSameBits(t, fmt.Sprintf("%s MatMulOn %d", name, workers), gotMM, wantMM)
			clear(gotMM)
			quant.MatMulParallel(m, gotMM, rows, x, n, workers)
			testkit.RequireSameBits(t, fmt.Sprintf("%s MatMulParallel %d", name, workers), gotMM, wantMM)
		}
		for _, rg := range [][2]int{{0, rows}, {0, rows / 2}, {rows / 3, rows}, {rows / 2, rows/2 + 1}} {
			lo, hi := rg[0], rg[1]
			part := make([]float32, hi-lo)
			m.Slice(lo, hi).MatVec(part, x[:cols])
			testkit.RequireSameBits(t, fmt.Sprintf("%s Slice(%d,%d)", name, lo, hi), part, want[lo:hi])
			clear(part)
			m.(quant.RowRanger).MatVecRows(part, x[:cols], lo, hi)
			testkit.RequireSameBits(t, fmt.Sprintf("%s MatVecRows(%d,%d)", name, lo, hi), part, want[lo:hi])
		}
		row, wantRow := make([]float32, cols), make([]float32, cols)
		m.(quant.RowDecoder).DecodeRow(row, rows-1)
		ref.(quant.RowDecoder).DecodeRow(wantRow, rows-1)
		testkit.RequireSameBits(t, name+" DecodeRow", row, wantRow)
	}
}

// TestLossless12Refusals: the stamp names the format and the bytes must
// agree; a malformed block or a header of another shape is refused when the
// matrix is built.
func TestLossless12Refusals(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 2))
	w, _ := cancellingBF16(r, 4, 100, 0)
	enc, err := lossless12.Encode(4, 100, w)
	if err != nil {
		t.Fatal(err)
	}
	nb := int64(len(enc))
	var mis *quant.ErrStampMismatch
	for _, tc := range []struct {
		name   string
		w      quant.TensorDesc
		s      *quant.TensorDesc
		O, I   int
		stamp  string
		target any
		is     error
	}{
		{"bf16 bytes stamped lossless12", quant.TensorDesc{DType: "BF16", NBytes: 800}, nil, 4, 100, "lossless12", &mis, quant.ErrStamp},
		{"one byte short", quant.TensorDesc{DType: "U8", NBytes: nb - 1}, nil, 4, 100, "lossless12", &mis, quant.ErrStamp},
		{"another row count", quant.TensorDesc{DType: "U8", NBytes: nb}, nil, 5, 100, "lossless12", &mis, quant.ErrStamp},
		{"with a scale tensor", quant.TensorDesc{DType: "U8", NBytes: nb}, &quant.TensorDesc{DType: "F32", NBytes: 16}, 4, 100, "lossless12", &mis, quant.ErrStamp},
		{"unstamped", quant.TensorDesc{DType: "U8", NBytes: nb}, nil, 4, 100, "", nil, quant.ErrDType},
		{"stamped bf16", quant.TensorDesc{DType: "U8", NBytes: nb}, nil, 4, 100, "bf16", nil, quant.ErrDType},
	} {
		f, _, err := quant.Resolve("w", tc.O, tc.I, tc.w, tc.s, tc.stamp)
		if !errors.Is(err, tc.is) {
			t.Errorf("%s: Resolve = %v, %v; want an error matching %v", tc.name, f, err, tc.is)
		}
		if tc.target != nil && !errors.As(err, tc.target) {
			t.Errorf("%s: %T, want %T", tc.name, err, tc.target)
		}
	}
	h, _ := lossless12.ParseHeader(enc)
	if _, err := quant.New(quant.Lossless12, 4, 100, h.Escapes+1, enc, nil); !errors.Is(err, quant.ErrWeightSize) {
		t.Errorf("New with another escape count: %v", err)
	}
	if _, err := quant.New(quant.Lossless12, 4, 100, h.Escapes, enc, []byte{1}); !errors.Is(err, quant.ErrScaleSize) {
		t.Errorf("New with scales: %v", err)
	}
	if _, err := quant.NewLossless12(2, 200, enc); !errors.Is(err, quant.ErrShape) {
		t.Errorf("NewLossless12 of another shape: %v", err)
	}
	bad := append([]byte(nil), enc...)
	bad[lossless12.HeaderSize] = 250 // row 0's first window base
	if _, err := quant.New(quant.Lossless12, 4, 100, h.Escapes, bad, nil); !errors.Is(err, lossless12.ErrMalformed) {
		t.Errorf("New of a malformed block: %v", err)
	}
	// Through the shard stamps of §6.8.
	st, err := quant.LoadStamps(map[string]map[string]string{"a.safetensors": {quant.StampKey: `{"w":"lossless12"}`}})
	if err != nil {
		t.Fatal(err)
	}
	if f, gs, err := st.Resolve("w", 4, 100, quant.TensorDesc{DType: "U8", NBytes: nb}, nil); err != nil || f != quant.Lossless12 || gs != h.Escapes {
		t.Errorf("Stamps.Resolve = %v, %d, %v", f, gs, err)
	}
}

// TestLossless12NoAlloc: once the pools are warm, the kernels, their
// parallel helpers and DecodeRow allocate nothing.
func TestLossless12NoAlloc(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	r := rand.New(rand.NewPCG(27, 4))
	const rows, cols, n = 300, 1000, 3
	w, x := cancellingBF16(r, rows, cols, n)
	m, _ := encodeLossless(t, rows, cols, w)
	p := parallel.NewPool(2)
	defer p.Close()
	dst := make([]float32, n*rows)
	row := make([]float32, cols)
	for name, f := range map[string]func(){
		"MatVec":         func() { m.MatVec(dst[:rows], x[:cols]) },
		"MatMul":         func() { m.MatMul(dst, rows, x, n) },
		"MatVecParallel": func() { quant.MatVecParallel(m, dst[:rows], x[:cols], 1) },
		"MatVecOn":       func() { quant.MatVecOn(p, m, dst[:rows], x[:cols], 2) },
		"MatMulOn":       func() { quant.MatMulOn(p, m, dst, rows, x, n, 2) },
		"DecodeRow":      func() { m.(quant.RowDecoder).DecodeRow(row, rows-1) },
	} {
		testkit.NoAllocs(t, "lossless12 "+name, 50, f)
	}
}

// BenchmarkLossless12Stream compares bf16 and lossless12 mat-vecs over a
// matrix far larger than the caches (12288 × 7168, 176 MB in bf16, 125 MB
// in lossless12), where a mat-vec is bound by memory bandwidth, on one and
// two workers. bytes/s is of the bf16 size in both, so the figures compare
// as weights per second.
func BenchmarkLossless12Stream(b *testing.B) {
	const rows, cols = 12288, 7168
	r := rand.New(rand.NewPCG(27, 7))
	w := randBF16(r, rows, cols)
	enc, err := lossless12.Encode(rows, cols, w)
	if err != nil {
		b.Fatal(err)
	}
	bf, err := quant.NewBF16(rows, cols, w)
	if err != nil {
		b.Fatal(err)
	}
	h, _ := lossless12.ParseHeader(enc)
	ll, err := quant.New(quant.Lossless12, rows, cols, h.Escapes, enc, nil)
	if err != nil {
		b.Fatal(err)
	}
	x := testkit.Gaussian(r, cols, 1)
	dst := make([]float32, rows)
	p := parallel.NewPool(2)
	defer p.Close()
	for _, workers := range []int{1, 2} {
		for _, m := range []quant.Matrix{bf, ll} {
			b.Run(fmt.Sprintf("%v/w%d", m.Format(), workers), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					quant.MatVecOn(p, m, dst, x, workers)
				}
			})
		}
	}
}
