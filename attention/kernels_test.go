package attention

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// kdaStep advances one head's state S ([D][D]) by one position and writes
// the head output o ([D]); u is scratch of length D. Evaluation (§5.3),
// all in f32 with separate roundings:
//
//	S[i][j] = α_i ⊗ S[i][j]
//	u_j = Σ_i (k_i ⊗ S[i][j])          f32 accumulator from +0, i ascending
//	S[i][j] = S[i][j] ⊕ ((k_i ⊗ β) ⊗ (v_j ⊖ u_j))
//	o_j = Σ_i (q̂_i ⊗ S[i][j])          f32 accumulator from +0, i ascending
//
// Decay and read share one pass over the rows, write and output another
// (decayRead, writeOut); per output element the order of the additions is
// the one above. It is the tests' statement of one step: the layer runs
// kdaSteps, which fuses the passes of consecutive positions.
func kdaStep(S, q, k, v, alpha []float32, beta float32, o, u []float32) {
	d := len(q)
	clear(u)
	for i := range d {
		decayRead(S[i*d:i*d+d], u, alpha[i], k[i])
	}
	for j := range u {
		u[j] = v[j] - u[j]
	}
	clear(o)
	for i := range d {
		writeOut(S[i*d:i*d+d], o, u, k[i]*beta, q[i])
	}
}

// The axpy kernels (assembly on amd64) must match the pure-Go loops bit for
// bit, for every length (vector body plus tail) and for special values.
func TestAxpyKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-30}
	val := func() float32 {
		if r.IntN(16) == 0 {
			return special[r.IntN(len(special))]
		}
		return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(40)-20)))
	}
	for n := 0; n <= 45; n++ {
		for trial := range 20 {
			xs := make([][]float32, 4)
			for j := range xs {
				xs[j] = make([]float32, n)
				for i := range xs[j] {
					xs[j][i] = val()
				}
			}
			a := []float64{float64(val()), float64(val()), float64(val()), float64(val())}
			acc0 := make([]float64, n)
			for i := range acc0 {
				acc0[i] = float64(val()) * float64(val())
			}
			got, want := append([]float64(nil), acc0...), append([]float64(nil), acc0...)
			axpy4(got, a, xs[0], xs[1], xs[2], xs[3])
			axpy4Go(want, a, xs[0], xs[1], xs[2], xs[3])
			compare64(t, "axpy4", n, trial, got, want)
			got, want = append(got[:0], acc0...), append(want[:0], acc0...)
			axpy1(got, a[1], xs[2])
			axpy1Go(want, a[1], xs[2])
			compare64(t, "axpy1", n, trial, got, want)
			// axpy4Go is four sequential axpy1Go passes.
			got, want = append(got[:0], acc0...), append(want[:0], acc0...)
			axpy4Go(got, a, xs[0], xs[1], xs[2], xs[3])
			for j := range 4 {
				axpy1Go(want, a[j], xs[j])
			}
			compare64(t, "axpy4Go vs 4×axpy1Go", n, trial, got, want)
		}
	}
}

func compare64(t *testing.T, what string, n, trial int, got, want []float64) {
	t.Helper()
	for i := range got {
		g, w := got[i], want[i]
		if math.Float64bits(g) != math.Float64bits(w) && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Fatalf("%s n=%d trial=%d [%d]: %v, want %v", what, n, trial, i, g, w)
		}
	}
}

// TestAxpyBlock3 holds the three-row block kernel to axpyRows on each row:
// every accumulator gets the same additions in the same order. Rows of
// ±2^40 and tiny values make a wrong order or a dropped addition visible.
func TestAxpyBlock3(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, w := range []int{64, 128, 256} {
		for _, k := range []int{0, 1, 5, 37} {
			t.Run(fmt.Sprintf("w%d_k%d", w, k), func(t *testing.T) {
				as, ak, bs := w+8, k+3, w+5
				b := make([]float32, max(1, k)*bs)
				for i := range b {
					b[i] = float32(r.NormFloat64())
					if r.IntN(7) == 0 {
						b[i] = float32(math.Ldexp(1, 40) * float64(1-2*r.IntN(2)))
					}
				}
				a := make([]float64, 3*ak)
				for i := range a {
					a[i] = float64(float32(r.NormFloat64()))
				}
				acc := make([]float64, 3*as)
				for i := range acc {
					acc[i] = float64(float32(r.NormFloat64()))
				}
				want := append([]float64(nil), acc...)
				if !axpyBlock3Applies(w) {
					t.Skip("the block kernel does not apply on this CPU")
				}
				axpyBlock3(acc, as, a, ak, b, bs, k, w)
				rows := make([][]float32, k)
				for j := range rows {
					rows[j] = b[j*bs : j*bs+w]
				}
				for tt := range 3 {
					axpyRows(want[tt*as:tt*as+w], a[tt*ak:tt*ak+k], rows)
				}
				for i := range acc {
					if math.Float64bits(acc[i]) != math.Float64bits(want[i]) {
						t.Fatalf("acc[%d] = %v, axpyRows %v", i, acc[i], want[i])
					}
				}
			})
		}
	}
}

// The recurrence row kernels (assembly on amd64) must match the float32 Go
// loops bit for bit, for every length and for special values (NaN payloads
// aside), including subnormals.
func TestKDARowKernelsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-39, -3e-40}
	val := func() float32 {
		if r.IntN(12) == 0 {
			return special[r.IntN(len(special))]
		}
		return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(60)-30)))
	}
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = val()
		}
		return v
	}
	same := func(what string, n int, got, want []float32) {
		t.Helper()
		for i := range got {
			g, w := got[i], want[i]
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Fatalf("%s n=%d [%d]: %v, want %v", what, n, i, g, w)
			}
		}
	}
	for n := 0; n <= 41; n++ {
		for range 30 {
			row, u, o, e := vec(n), vec(n), vec(n), vec(n)
			a, k := val(), val()
			r1, u1 := append([]float32(nil), row...), append([]float32(nil), u...)
			r2, u2 := append([]float32(nil), row...), append([]float32(nil), u...)
			decayRead(r1, u1, a, k)
			decayReadGo(r2, u2, a, k)
			same("decayRead row", n, r1, r2)
			same("decayRead u", n, u1, u2)
			r1, o1 := append(r1[:0], row...), append([]float32(nil), o...)
			r2, o2 := append(r2[:0], row...), append([]float32(nil), o...)
			writeOut(r1, o1, e, a, k)
			writeOutGo(r2, o2, e, a, k)
			same("writeOut row", n, r1, r2)
			same("writeOut o", n, o1, o2)
			kb, q := val(), val()
			r1, o1, u1 = append(r1[:0], row...), append(o1[:0], o...), append(u1[:0], u...)
			r2, o2, u2 = append(r2[:0], row...), append(o2[:0], o...), append(u2[:0], u...)
			writeDecay(r1, o1, e, u1, kb, q, a, k)
			writeDecayGo(r2, o2, e, u2, kb, q, a, k)
			same("writeDecay row", n, r1, r2)
			same("writeDecay o", n, o1, o2)
			same("writeDecay u", n, u1, u2)
		}
	}
}

// TestKDAStepsMatchesSteps holds the fused pass of kdaSteps (write and
// output of one position with decay and read of the next) to T calls of
// kdaStep, bit for bit, over head sizes with and without a vector tail, on
// both the vector and the Go twin of every pass.
func TestKDAStepsMatchesSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, d := range []int{1, 7, 8, 19, 64, 128, 130} {
		for _, T := range []int{1, 2, 3, 6} {
			const h, hh = 3, 1
			p := h * d
			rnd := func(n int, lo, hi float32) []float32 {
				a := make([]float32, n)
				for i := range a {
					a[i] = lo + (hi-lo)*r.Float32()
				}
				return a
			}
			q, k, v := rnd(T*p, -2, 2), rnd(T*p, -2, 2), rnd(T*p, -3, 3)
			alpha, beta := rnd(T*p, 0.3, 1), rnd(T*h, 0, 1)
			S0 := rnd(d*d, -1, 1)
			want, got := slices.Clone(S0), slices.Clone(S0)
			wantO, gotO := make([]float32, T*p), make([]float32, T*p)
			u := make([]float32, d)
			for tt := range T {
				o := tt*p + hh*d
				kdaStep(want, q[o:o+d], k[o:o+d], v[o:o+d], alpha[o:o+d], beta[tt*h+hh], wantO[o:o+d], u)
			}
			kdaSteps(got, q, k, v, alpha, beta, gotO, make([]float32, d), make([]float32, d), T, hh, h)
			testkit.RequireSameBits(t, fmt.Sprintf("d=%d T=%d: state", d, T), got, want)
			testkit.RequireSameBits(t, fmt.Sprintf("d=%d T=%d: o", d, T), gotO, wantO)
		}
	}
}

// TestWriteDecayTwin compares writeDecay (the vector pass where the CPU has
// it) with writeDecayGo and with writeOutGo followed by decayReadGo.
func TestWriteDecayTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, n := range []int{1, 8, 13, 16, 37, 128} {
		row := make([]float32, n)
		o, e, u := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range n {
			row[i], o[i], e[i], u[i] = r.Float32()*4-2, r.Float32()*4-2, r.Float32()*4-2, r.Float32()*4-2
		}
		kb, q, a, k := r.Float32()*2-1, r.Float32()*2-1, r.Float32(), r.Float32()*2-1
		r1, o1, u1 := slices.Clone(row), slices.Clone(o), slices.Clone(u)
		writeDecay(r1, o1, e, u1, kb, q, a, k)
		r2, o2, u2 := slices.Clone(row), slices.Clone(o), slices.Clone(u)
		writeDecayGo(r2, o2, e, u2, kb, q, a, k)
		r3, o3, u3 := slices.Clone(row), slices.Clone(o), slices.Clone(u)
		writeOutGo(r3, o3, e, kb, q)
		decayReadGo(r3, u3, a, k)
		for _, c := range [][2][]float32{{r1, r3}, {o1, o3}, {u1, u3}, {r2, r3}, {o2, o3}, {u2, u3}} {
			for i := range c[0] {
				if math.Float32bits(c[0][i]) != math.Float32bits(c[1][i]) {
					t.Fatalf("n=%d element %d: %v, want %v", n, i, c[0][i], c[1][i])
				}
			}
		}
	}
}
