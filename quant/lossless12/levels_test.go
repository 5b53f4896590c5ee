package lossless12

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/kernels/dot"
	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
)

// A level is one way MatVec runs on this machine, forced on a copy of a
// matrix: the AVX-512 decoder, the AVX2 one or the pure-Go twin, each
// followed by the bf16 kernel.
type level struct {
	name string
	set  func(*Matrix)
}

// levels lists the levels this binary and CPU can run, lowest first: the
// pure-Go decoder, the AVX2 one and the AVX-512 one, each followed by the
// bf16 kernels.
func levels() []level {
	ls := []level{{"go", func(m *Matrix) { m.simd, m.wide = false, false }}}
	if haveAVX2 {
		ls = append(ls, level{"avx2", func(m *Matrix) { m.simd, m.wide = true, false }})
	}
	if haveWide {
		ls = append(ls, level{"avx512", func(m *Matrix) { m.simd, m.wide = true, true }})
	}
	return ls
}

// on returns a copy of m that runs at level l.
func (l level) on(m *Matrix) *Matrix {
	c := *m
	l.set(&c)
	return &c
}

// escapeEverywhere draws a [rows, cols] bf16 matrix of Gaussian weights
// and gives row i one escape in every block
// k, at position (i + k) mod 64, and a second one, 23 further on, in every
// third row; the activations cancel as cancellingX's do. Over 64 rows every
// position of a block holds an escape. Each escape is a weight 2^15 to 2^18
// times smaller than the block's largest, just below its window, so that
// a wrong escape byte changes the float32 result (the Gaussian weights
// escape besides, about one in fifty).
func escapeEverywhere(r *rand.Rand, rows, cols int) ([]byte, []float32) {
	w, x := cancellingX(r, rows, cols, 1)
	code := func(i, c int) int { return 2 * (i*cols + c) }
	for i := range rows {
		for lo := 0; lo < cols; lo += BlockSize {
			hi := min(lo+BlockSize, cols)
			emax := 0
			for c := lo; c < hi; c++ {
				emax = max(emax, int(w[code(i, c)+1]&0x7F)<<1|int(w[code(i, c)]>>7))
			}
			for _, p := range []int{(i + lo/BlockSize) % BlockSize, (i + lo/BlockSize + 23) % BlockSize} {
				if c := lo + p; c < hi {
					e := max(emax-Window-r.IntN(4), 0) // 0: a window at 0, no escape
					v := uint16(r.IntN(2))<<15 | uint16(e)<<7 | uint16(r.IntN(128))
					w[code(i, c)], w[code(i, c)+1] = byte(v), byte(v>>8)
				}
				if i%3 != 0 {
					break
				}
			}
		}
	}
	return w, x
}

// escapePositions returns, for each position in a block, how many whole
// blocks of m escape there.
func escapePositions(m *Matrix) [BlockSize]int {
	var n [BlockSize]int
	for r := range m.h.Rows {
		_, _, idx, _ := m.parts(r)
		for k := range m.h.Cols / BlockSize {
			pl, w := blockPlanes(idx, k, BlockSize)
			p := planeWords(pl, w)
			for e := p[0] & p[1] & p[2]; e != 0; e &= e - 1 {
				n[bits.TrailingZeros64(e)]++
			}
		}
	}
	return n
}

// TestLevelsMatchBF16 runs every level on every row range of small
// matrices — odd row counts, row ranges of every width, widths with and
// without a short last block — on three kinds
// of cancelling data, and requires the bits of dot.MatVecBF16 (and of
// dot.MatMulBF16 for batches of two and four rows).
func TestLevelsMatchBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 5))
	gens := []struct {
		name string
		gen  func(rows, cols int) ([]byte, []float32)
	}{
		{"cancelling", func(rows, cols int) ([]byte, []float32) { return cancelling(r, rows, cols, 1) }},
		{"cancellingX", func(rows, cols int) ([]byte, []float32) { return cancellingX(r, rows, cols, 1) }},
		{"escapes", func(rows, cols int) ([]byte, []float32) { return escapeEverywhere(r, rows, cols) }},
	}
	ls := levels()
	for _, cols := range []int{64, 128, 200, 1000, 1024} {
		for _, rows := range []int{1, 2, 3, 5, 7, 9, 64} {
			for _, g := range gens {
				gname, gen := g.name, g.gen
				w, x := gen(rows, cols)
				m := mustOpen(t, rows, cols, w)
				want := make([]float32, rows)
				dot.MatVecBF16(want, w, x)
				step := 1
				if rows > 9 {
					step = 13
				}
				// Batches of two rows and of four.
				_, xs := gen(0, cols)
				xs = append(append(xs, x...), xs...)
				xs = append(append(xs, x...), xs[:cols]...)
				wants := map[int][]float32{}
				for _, n := range []int{2, 4} {
					wants[n] = make([]float32, n*rows)
					dot.MatMulBF16(wants[n], rows, w, xs[:n*cols], n)
				}
				for _, l := range ls {
					ml := l.on(m)
					name := fmt.Sprintf("%s [%d,%d] %s", l.name, rows, cols, gname)
					for n, wantN := range wants {
						gotN := make([]float32, n*rows)
						ml.MatMul(gotN, rows, xs[:n*cols], n)
						testkit.RequireSameBits(t, fmt.Sprintf("%s MatMul of %d", name, n), gotN, wantN)
					}
					got := make([]float32, rows)
					ml.MatVec(got, x)
					testkit.RequireSameBits(t, name, got, want)
					for lo := 0; lo < rows; lo += step {
						for hi := lo + 1; hi <= rows; hi += step {
							part := got[:hi-lo]
							clear(part)
							ml.MatVecRows(part, x, lo, hi)
							testkit.RequireSameBits(t, fmt.Sprintf("%s rows [%d,%d)", name, lo, hi), part, want[lo:hi])
						}
					}
				}
			}
		}
	}
}

// TestEscapesEveryPosition checks that escapeEverywhere puts an escape in
// every position of a whole block, so TestLevelsMatchBF16 runs the
// kernels' escape path at each, and compares the levels on a wider matrix
// of it (K3's hidden size).
func TestEscapesEveryPosition(t *testing.T) {
	const rows, cols = 67, 7168
	w, x := escapeEverywhere(rand.New(rand.NewPCG(3, 4)), rows, cols)
	m := mustOpen(t, rows, cols, w)
	for p, n := range escapePositions(m) {
		if n == 0 {
			t.Fatalf("no whole block escapes at position %d", p)
		}
	}
	want := make([]float32, rows)
	dot.MatVecBF16(want, w, x)
	for _, l := range levels() {
		got := make([]float32, rows)
		l.on(m).MatVec(got, x)
		testkit.RequireSameBits(t, l.name, got, want)
	}
}

// TestLevelsWorkers splits the rows over 1, 2 and 3 workers as the engine
// does (each calls MatVecRows on its range) and requires the bits of one
// call.
func TestLevelsWorkers(t *testing.T) {
	const rows, cols = 203, 1000
	w, x := cancelling(rand.New(rand.NewPCG(8, 9)), rows, cols, 1)
	m := mustOpen(t, rows, cols, w)
	want := make([]float32, rows)
	dot.MatVecBF16(want, w, x)
	for _, l := range levels() {
		ml := l.on(m)
		for _, workers := range []int{1, 2, 3} {
			got := make([]float32, rows)
			parallel.For(rows, workers, 1, func(lo, hi int) { ml.MatVecRows(got[lo:hi], x, lo, hi) })
			testkit.RequireSameBits(t, fmt.Sprintf("%s workers=%d", l.name, workers), got, want)
		}
	}
}

// TestLevelsNoAllocs requires that a mat-vec allocates nothing at any
// level once the scratch pools are warm.
func TestLevelsNoAllocs(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	const rows, cols = 37, 1000
	w, x := cancelling(rand.New(rand.NewPCG(1, 2)), rows, cols, 1)
	m := mustOpen(t, rows, cols, w)
	dst := make([]float32, rows)
	for _, l := range levels() {
		ml := l.on(m)
		testkit.NoAllocs(t, l.name+" MatVec", 20, func() { ml.MatVec(dst, x) })
		testkit.NoAllocs(t, l.name+" MatVecRows", 20, func() { ml.MatVecRows(dst[:30], x, 5, 35) })
	}
}

// TestGODEBUGLevels re-runs the level tests in a child with the AVX-512
// and then the AVX2 kernels turned off by GODEBUG, as a user on such a CPU
// would run, and checks that Open then picks the level below.
func TestGODEBUGLevels(t *testing.T) {
	if v, ok := testkit.ChildArg("K3_L12_GODEBUG"); ok {
		fmt.Printf("LEVEL %s %s\n", v, Level())
		return
	}
	if Level() == "go" {
		t.Skip("no assembly kernels in this build or on this CPU")
	}
	for _, c := range []struct{ godebug, want string }{
		{"cpu.avx512f=off", "avx2"},
		{"cpu.avx2=off", "go"},
	} {
		t.Setenv("GODEBUG", c.godebug)
		out := testkit.RunChild(t, "TestGODEBUGLevels", "K3_L12_GODEBUG", c.godebug)
		if line := testkit.ChildLine(t, out, "LEVEL"); !strings.HasSuffix(line, c.want) {
			t.Errorf("GODEBUG=%s: %q, want %s", c.godebug, line, c.want)
		}
		for _, test := range []string{"TestLevelsMatchBF16", "TestEscapesEveryPosition", "TestKernelsMatchBF16"} {
			out := testkit.RunChild(t, test, "K3_L12_LEVELS", c.godebug)
			if !strings.Contains(string(out), "PASS") || strings.Contains(string(out), "no tests to run") {
				t.Errorf("GODEBUG=%s %s:\n%s", c.godebug, test, out)
			}
		}
	}
}

// TestLevelsNonFiniteBlocks puts NaNs and an infinity in blocks at every
// position, so that their windows reach exponent 255 (base 249, the top of
// the base byte's range, where base + index must not wrap) among blocks
// with escapes on both sides; every row must keep its exact bits, and those
// rows must come out non-finite as the bf16 kernel's do (a NaN's payload is
// the hardware's). The layout's first kernels, which decoded in registers,
// handed such blocks back to Go in the middle of a pass of four rows; the
// rows are still grouped that way.
func TestLevelsNonFiniteBlocks(t *testing.T) {
	// 1000 columns end in a short block; 1024 do not, and have four clean
	// rows in front.
	for _, shape := range []struct{ cols, clean int }{{1000, 0}, {1024, 4}} {
		cols, c0 := shape.cols, shape.clean
		rows := 11 + c0
		w, x := escapeEverywhere(rand.New(rand.NewPCG(5, 6)), rows, cols)
		put := func(r, c int, code uint16) {
			w[2*((r+c0)*cols+c)], w[2*((r+c0)*cols+c)+1] = byte(code), byte(code>>8)
		}
		// Passes: rows 0–3 and 4–7 of four, 8–9 of two, 10 of one (after
		// the clean rows); a block with a non-finite weight at each
		// position of each pass.
		hand := map[int]int{1: 3, 3: 7, 4: 4, 6: 9, 8: 12, 9: 2, 10: 5} // row: block
		for r, k := range hand {
			// A NaN, of a payload of its own: built as a finite weight, an
			// exponent 255 would give a finite result, or an infinity, where
			// the bf16 kernel gives a NaN.
			put(r, k*BlockSize+(r*7)%BlockSize, 0x7F81+uint16(r))
		}
		put(7, 15*BlockSize+3, 0xFF80) // −Inf, in the last block
		m := mustOpen(t, rows, cols, w)
		bad := map[int]bool{7 + c0: true}
		for r, k := range hand {
			bad[r+c0] = true
			if bases, _, _, _ := m.parts(r + c0); bases[k] != MaxBase {
				t.Fatalf("row %d block %d: base %d, want %d", r+c0, k, bases[k], MaxBase)
			}
		}
		want := make([]float32, rows)
		dot.MatVecBF16(want, w, x)
		for i, v := range want {
			if finite := !math.IsInf(float64(v), 0) && v == v; finite == bad[i] {
				t.Fatalf("%d columns, row %d: the bf16 kernel gives %v", cols, i, v)
			}
		}
		for _, l := range levels() {
			got := make([]float32, rows)
			l.on(m).MatVec(got, x)
			testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%s %d columns", l.name, cols), got, want)
		}
	}
}
