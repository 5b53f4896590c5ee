//go:build !purego

package dot

import (
	"math"
	"math/rand/v2"
	"testing"
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

func kernelSets() []kernelSet {
	return []kernelSet{
		{formats[0], fmtF32, genericHeadF32, useAVX2},
		{formats[1], fmtBF16, genericHeadBF16, useAVX2},
		{formats[2], fmtF16, genericHeadF16, useF16C},
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
				w := randW(r, k.f, 2, m, rep%4, special)
				w0, w1 := w[:m*k.f.size], w[m*k.f.size:]
				xa, xb := randX(r, m, special), randX(r, m, special)
				sa, sb := make([]float64, m), make([]float64, m)
				widen(k.af, sa, xa)
				widen(k.af, sb, xb)

				want00 := k.head(w0, xa)
				want10 := k.head(w1, xa)
				want01 := k.head(w0, xb)
				ref := refR16Acc(widenRow(k.f, w0, m), xa)
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
			}
		}
	}
	// Guard: on this data the order of f64 adds must matter, or the bitwise
	// agreement above would not pin down the tree.
	if total > 0 && seqDiffer < total/2 {
		t.Fatalf("sequential f64 sum equals R16 in %d of %d cases: data too tame", total-seqDiffer, total)
	}
}

// TestAsmMatchesGenericDrivers runs the exported drivers (assembly where the
// CPU allows) against the pure-Go drivers on shapes with awkward tails.
func TestAsmMatchesGenericDrivers(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, k := range kernelSets() {
		for rep := range 60 {
			special := rep%3 == 0
			rows, cols, n := 1+r.IntN(7), 1+r.IntN(90), 1+r.IntN(17)
			w := randW(r, k.f, rows, cols, rep%4, special)
			x := randX(r, n*cols, special)
			got := make([]float32, n*rows)
			want := make([]float32, n*rows)
			k.f.matMul(got, rows, w, x, n)
			genericMatMul(k.f.gen, k.f.size, want, rows, w, x, n, rows, cols)
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s rows=%d cols=%d n=%d elem %d: %g vs generic %g", k.f.name, rows, cols, n, i, got[i], want[i])
				}
			}
			k.f.matVec(got[:rows], w, x[:cols])
			genericMatVec(k.f.gen, k.f.size, want[:rows], w, x[:cols])
			for i := range rows {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s MatVec rows=%d cols=%d row %d: %g vs generic %g", k.f.name, rows, cols, i, got[i], want[i])
				}
			}
		}
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
func TestWidenPermBF16(t *testing.T) {
	perm := [16]int{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}
	x := make([]float32, 48)
	for i := range x {
		x[i] = float32(i)
	}
	s := make([]float64, 48)
	widen(fmtBF16, s, x)
	for b := 0; b < 48; b += 16 {
		for j, p := range perm {
			if s[b+j] != float64(b+p) {
				t.Fatalf("widened[%d] = %v, want x[%d]", b+j, s[b+j], b+p)
			}
		}
	}
}
