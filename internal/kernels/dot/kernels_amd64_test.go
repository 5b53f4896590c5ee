//go:build !purego

package dot

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// These tests compare the assembly kernels with the pure-Go twin at the
// float64 level, before the final rounding, where any deviation from the
// lane partition or the tree shows in the last bits.

type kernelSet struct {
	f    format
	af   *asmFormat
	head func(w []byte, x []float32) float64
	ok   bool
}

// kernelSets lists every assembly level of every format, so each level the
// CPU has is exercised whatever the dispatcher would pick.
func kernelSets() []kernelSet {
	return []kernelSet{
		{formats[0], fmtF32, genericHeadF32, useAVX2},
		{formats[1], fmtBF16, genericHeadBF16, useAVX2},
		{formats[2], fmtF16, genericHeadF16, useF16C},
		{formats[0], fmtF32x512, genericHeadF32, useAVX512},
		{formats[1], fmtBF16x512, genericHeadBF16, useAVX512},
		{formats[2], fmtF16x512, genericHeadF16, useAVX512 && useF16C},
	}
}

// TestDispatchPicksWidest pins the run-time choice: AVX-512 where the CPU
// has it, else AVX2, else the pure-Go twin.
func TestDispatchPicksWidest(t *testing.T) {
	for _, c := range []struct {
		got, want512, want2 *asmFormat
		ok2                 bool
	}{
		{kernF32, fmtF32x512, fmtF32, useAVX2},
		{kernBF16, fmtBF16x512, fmtBF16, useAVX2},
		{kernF16, fmtF16x512, fmtF16, useF16C},
	} {
		want := (*asmFormat)(nil)
		switch {
		case useAVX512 && c.ok2:
			want = c.want512
		case c.ok2:
			want = c.want2
		}
		if c.got != want {
			t.Errorf("dispatch picked %v, want %v", c.got, want)
		}
	}
	if kernBF16 != nil {
		t.Logf("bf16 kernels: %s", kernBF16.name)
	}
}

func TestAsmKernelsBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	seqDiffer, total := 0, 0
	for _, k := range kernelSets() {
		if !k.ok {
			t.Logf("%s: CPU lacks the features, assembly not exercised", k.f.name)
			continue
		}
		for _, special := range []bool{false, true} {
			for rep := range 200 {
				m := 16 * (1 + r.IntN(24))
				if rep == 0 {
					m = 16
				}
				w := randW(r, k.f, 4, m, rep%4, special)
				rb := m * k.f.size
				w0, w1, w2, w3 := w[:rb], w[rb:2*rb], w[2*rb:3*rb], w[3*rb:]
				xa, xb := randX(r, m, special), randX(r, m, special)
				xc, xd := randX(r, m, special), randX(r, m, special)
				if !special && rep%2 == 1 {
					// Near-cancelling rows: the result is of the order of
					// the rounding errors, so a wrong lane map shows.
					cancel(k.f, w0, xa)
					cancel(k.f, w1, xa)
					cancel(k.f, w0, xb)
				}
				sa, sb := make([]float64, m), make([]float64, m)
				sc, sd := make([]float64, m), make([]float64, m)
				widen(k.af, sa, xa)
				widen(k.af, sb, xb)
				widen(k.af, sc, xc)
				widen(k.af, sd, xd)

				want00 := k.head(w0, xa)
				want10 := k.head(w1, xa)
				want01 := k.head(w0, xb)
				ref := testkit.RefR16(widenRow(k.f, w0, m), xa)
				if !sameBits64(want00, ref) {
					t.Fatalf("%s m=%d: generic head %v, reference %v", k.f.name, m, want00, ref)
				}
				if !special {
					total++
					var seq float64
					for i := range m {
						seq += k.f.widen(w0, i) * float64(xa[i])
					}
					if seq != ref {
						seqDiffer++
					}
				}

				check := func(name string, got, want float64) {
					t.Helper()
					if !sameBits64(got, want) {
						t.Fatalf("%s %s m=%d special=%v: asm %v (%#x), generic %v (%#x)", k.f.name, name, m, special,
							got, math.Float64bits(got), want, math.Float64bits(want))
					}
				}
				check("rows1", k.af.rows1(&w0[0], &sa[0], m), want00)
				g0, g1 := k.af.rows2(&w0[0], &w1[0], &sa[0], m)
				check("rows2[0]", g0, want00)
				check("rows2[1]", g1, want10)
				g0, g1 = k.af.xs2(&w0[0], &sa[0], &sb[0], m)
				check("xs2[0]", g0, want00)
				check("xs2[1]", g1, want01)
				if k.af.rows4 != nil {
					var a [4]float64
					k.af.rows4(&w0[0], &w1[0], &w2[0], &w3[0], &sa[0], m, &a, rowsPrefetch(len(w0)))
					check("rows4[0]", a[0], want00)
					check("rows4[1]", a[1], want10)
					check("rows4[2]", a[2], k.head(w2, xa))
					check("rows4[3]", a[3], k.head(w3, xa))
				}
				if k.af.xs4 != nil {
					var a [4]float64
					k.af.xs4(&w0[0], &sa[0], &sb[0], &sc[0], &sd[0], m, &a)
					check("xs4[0]", a[0], want00)
					check("xs4[1]", a[1], want01)
					check("xs4[2]", a[2], k.head(w0, xc))
					check("xs4[3]", a[3], k.head(w0, xd))
				}
				if k.af.r2xs4 != nil {
					// Two column blocks, the partials carried in acc between
					// them as asmMatMul does, must give the one-pass heads.
					var acc [128]float64
					var a [8]float64
					h := m / 32 * 16
					if h > 0 {
						k.af.r2xs4(&w0[0], &w1[0], &sa[0], &sb[0], &sc[0], &sd[0], h, &acc)
					}
					k.af.r2xs4(&w0[2*h], &w1[2*h], &sa[h], &sb[h], &sc[h], &sd[h], m-h, &acc)
					k.af.reduce8(&acc, &a)
					for i, wi := range [][]byte{w0, w1} {
						for j, xj := range [][]float32{xa, xb, xc, xd} {
							check(fmt.Sprintf("r2xs4[%d][%d]", i, j), a[4*i+j], k.head(wi, xj))
						}
					}
				}
				if k.af.r3xs4 != nil {
					var acc [192]float64
					var a [12]float64
					h := m / 32 * 16
					if h > 0 {
						k.af.r3xs4(&w0[0], &w1[0], &w2[0], &sa[0], &sb[0], &sc[0], &sd[0], h, &acc, len(w0))
					}
					k.af.r3xs4(&w0[2*h], &w1[2*h], &w2[2*h], &sa[h], &sb[h], &sc[h], &sd[h], m-h, &acc, len(w0))
					k.af.reduce12(&acc, &a)
					for i, wi := range [][]byte{w0, w1, w2} {
						for j, xj := range [][]float32{xa, xb, xc, xd} {
							check(fmt.Sprintf("r3xs4[%d][%d]", i, j), a[4*i+j], k.head(wi, xj))
						}
					}
				}
			}
		}
	}
	// Guard: on this data the order of f64 adds must matter, or the bitwise
	// agreement above would not pin down the tree.
	if total > 0 && seqDiffer < total/2 {
		t.Fatalf("sequential f64 sum equals R16 in %d of %d cases: data too tame", total-seqDiffer, total)
	}
}

// TestAsmMatchesGenericDrivers runs the drivers at every assembly level the
// CPU has against the pure-Go drivers on shapes with awkward tails, position
// counts that leave every remainder of the four- and two-way batching, and
// near-cancelling rows.
func TestAsmMatchesGenericDrivers(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, k := range kernelSets() {
		if !k.ok {
			t.Logf("%s: CPU lacks the features, assembly not exercised", k.af.name)
			continue
		}
		for rep := range 80 {
			special := rep%3 == 0
			rows, cols, n := 1+r.IntN(11), 1+r.IntN(90), 1+r.IntN(17)
			if rep%5 == 0 {
				cols = 16 * (1 + r.IntN(5))
			}
			w := randW(r, k.f, rows, cols, rep%4, special)
			x := randX(r, n*cols, special)
			if !special {
				cancelRows(k.f, w, x, n, rows, cols)
			}
			got, want := requireMatMulAsGeneric(t, k, w, x, n, rows, cols)
			asmMatVec(k.af, got[:rows], w, x[:cols])
			genericMatVec(k.f.gen, k.f.size, want[:rows], w, x[:cols])
			for i := range rows {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s MatVec rows=%d cols=%d row %d: %g vs generic %g", k.af.name, rows, cols, i, got[i], want[i])
				}
			}
		}
	}
}

// TestAsmLevelsAgreeLarge crosses the row-block boundary of the batched
// driver at every level and compares all levels and the pure-Go twin.
func TestAsmLevelsAgreeLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, k := range kernelSets() {
		if !k.ok {
			continue
		}
		rows, cols, n := 150, 1037, 11 // n: every remainder of 4 and 2
		if k.f.size == 4 {
			rows = 70
		}
		x := randX(r, n*cols, false)
		w := randW(r, k.f, rows, cols, 1, false)
		requireMatMulAsGeneric(t, k, w, x, n, rows, cols)
	}
}

func widenRow(f format, w []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = f.widen(w, i)
	}
	return out
}

// TestWidenPermBF16 pins the activation layout the bf16 kernels expect:
// per block of 16, even elements then odd ones, per half block.
// The AVX-512 layout is the eight even elements of a block, then the odd.
func TestWidenPermBF16(t *testing.T) {
	for _, c := range []struct {
		f    *asmFormat
		perm [16]int
	}{
		{fmtBF16, [16]int{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}},
		{fmtBF16x512, [16]int{0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15}},
	} {
		x := make([]float32, 48)
		for i := range x {
			x[i] = float32(i)
		}
		s := make([]float64, 48)
		widen(c.f, s, x)
		for b := 0; b < 48; b += 16 {
			for j, p := range c.perm {
				if s[b+j] != float64(b+p) {
					t.Fatalf("%s: widened[%d] = %v, want x[%d]", c.f.name, b+j, s[b+j], b+p)
				}
			}
		}
	}
}

// TestGemmMatchesGeneric runs the packed mat-mul (gemmMatMul, which the
// driver picks from gemmMinRows activation rows on) against the pure-Go
// driver: position counts that leave every remainder of six, row counts
// that leave every remainder of four and span several panel groups, column
// counts with and without a tail and over several chunks, near-cancelling
// rows, and a dst stride wider than rows whose gaps must stay untouched.
func TestGemmMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	shapes := [][3]int{ // rows, cols, n
		{1, 16, 32}, {3, 31, 33}, {4, 512, 34}, {5, 528, 35}, {7, 1037, 36},
		{37, 100, 37}, {70, 1100, 40}, {150, 1037, 45}, {9, 2064, 64},
		{24, 512, 40}, {13, 1024, 33}, // the eight- and four-row stores
	}
	for _, k := range kernelSets() {
		if !k.ok || k.af.panel == nil {
			continue
		}
		for i, sh := range shapes {
			rows, cols, n := sh[0], sh[1], sh[2]
			special := i%3 == 2
			w := randW(r, k.f, rows, cols, i%4, special)
			x := randX(r, n*cols, special)
			if !special {
				cancelRows(k.f, w, x, n, rows, cols)
			}
			checkGemm(t, k, w, x, n, rows, cols, rows+3)
		}
	}
}

// checkGemm runs gemmMatMul and the pure-Go driver on the same data into
// outputs of the given stride, whose gaps start at −7 (so a write into a
// gap is a difference too), and fails at the first element whose bits
// differ.
func checkGemm(t *testing.T, k kernelSet, w []byte, x []float32, n, rows, cols, stride int) {
	t.Helper()
	got := make([]float32, n*stride)
	want := make([]float32, n*stride)
	for i := range got {
		got[i], want[i] = -7, -7
	}
	gemmMatMul(k.af, got, stride, w, x, n, rows, cols)
	genericMatMul(k.f.gen, k.f.size, want, stride, w, x, n, rows, cols)
	for i := range got {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("%s rows=%d cols=%d n=%d stride=%d: position %d row %d: %g, generic %g",
				k.af.name, rows, cols, n, stride, i/stride, i%stride, got[i], want[i])
		}
	}
}

// cancelRows makes weight row t mod rows nearly cancel against activation
// row t, for each of the n activation rows (see cancel).
func cancelRows(f format, w []byte, x []float32, n, rows, cols int) {
	rb := cols * f.size
	for t := range n {
		row := t % rows
		cancel(f, w[row*rb:(row+1)*rb], x[t*cols:(t+1)*cols])
	}
}

// asmAndGenericMatMul runs the batched product of n columns on k's assembly
// driver and on its pure-Go twin.
func asmAndGenericMatMul(k kernelSet, w []byte, x []float32, n, rows, cols int) (got, want []float32) {
	got, want = make([]float32, n*rows), make([]float32, n*rows)
	asmMatMul(k.af, got, rows, w, x, n, rows, cols)
	genericMatMul(k.f.gen, k.f.size, want, rows, w, x, n, rows, cols)
	return got, want
}

// requireMatMulAsGeneric runs asmAndGenericMatMul and fails t at the first output whose bits
// differ, naming the shape, position and row; it returns both products.
func requireMatMulAsGeneric(t *testing.T, k kernelSet, w []byte, x []float32, n, rows, cols int) (got, want []float32) {
	t.Helper()
	got, want = asmAndGenericMatMul(k, w, x, n, rows, cols)
	for i := range got {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("%s rows=%d cols=%d n=%d: position %d row %d: %g, generic %g",
				k.af.name, rows, cols, n, i/rows, i%rows, got[i], want[i])
		}
	}
	return got, want
}
