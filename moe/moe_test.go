package moe

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
)

func TestMoEFixture(t *testing.T) {
	f := opfix.Load(t, "moe")
	for key, want := range map[string]int{"hidden": 128, "latent": 64, "moe_inter": 48, "n_experts": 8, "top_k": 2,
		"n_shared": 2, "renorm": 1, "latent_norm": 1} {
		if got := f.Int(key); got != want {
			t.Fatalf("fixture %s = %d, test binds %d", key, got, want)
		}
	}
	if f.Scalar("routed_scale") != 1 || f.Scalar("situ_b1") != 4 || f.Scalar("situ_b2") != 25 || float32(f.Scalar("rms_eps")) != 1e-5 {
		t.Fatal("fixture scalars differ from the bound config")
	}
	m, _ := moeFromFixture(t, f, "", 5, 1)
	in := f.F32("in", 1, 3, 128)
	out := make([]float32, len(in))
	if err := m.Forward(out, in, 3); err != nil {
		t.Fatal(err)
	}
	opfix.Compare(t, f.Tol, "moe out", out, f.F32("out", 1, 3, 128))
}

// countingSource records how the MoE asks for experts.
type countingSource struct {
	inner    ExpertSource
	calls    [][]int
	released int
}

func (c *countingSource) Experts(layer int, ids []int, dst []Expert) ([]Expert, func(), error) {
	c.calls = append(c.calls, append([]int(nil), ids...))
	ex, rel, err := c.inner.Experts(layer, ids, dst)
	return ex, func() { c.released++; rel() }, err
}

// E1: chunk-union MoE over T positions ≡ one position at a time ≡ any
// worker count; the union is fetched in one call and released once.
func TestMoEChunkUnionBitIdentical(t *testing.T) {
	f := opfix.Load(t, "moe")
	in := f.F32("in", 1, 3, 128)
	// More positions: the fixture rows plus mixtures of them.
	const T = 7
	x := make([]float32, T*128)
	copy(x, in)
	for t := 3; t < T; t++ {
		for i := range 128 {
			x[t*128+i] = in[(t%3)*128+i]*0.7 - in[((t+1)%3)*128+i]*0.4
		}
	}
	m1, src := moeFromFixture(t, f, "", 2, 1)
	cs := &countingSource{inner: src}
	m1.src = cs
	all := make([]float32, T*128)
	ids := make([]int, T*2)
	if err := m1.ForwardRouted(all, x, T, ids); err != nil {
		t.Fatal(err)
	}
	if len(cs.calls) != 1 || cs.released != 1 {
		t.Fatalf("%d Experts calls, %d releases; want one of each", len(cs.calls), cs.released)
	}
	union := map[int]bool{}
	for _, id := range ids {
		union[id] = true
	}
	if len(cs.calls[0]) != len(union) {
		t.Fatalf("requested %v for picks %v", cs.calls[0], ids)
	}
	one := make([]float32, T*128)
	for tt := range T {
		if err := m1.Forward(one[tt*128:(tt+1)*128], x[tt*128:(tt+1)*128], 1); err != nil {
			t.Fatal(err)
		}
	}
	testkit.RequireSameBits(t, "per-token vs chunk-union", one, all)
	for _, w := range []int{2, 3} {
		mw, _ := moeFromFixture(t, f, "", 2, w)
		got := make([]float32, T*128)
		if err := mw.Forward(got[:3*128], x[:3*128], 3); err != nil {
			t.Fatal(err)
		}
		if err := mw.Forward(got[3*128:], x[3*128:], T-3); err != nil {
			t.Fatal(err)
		}
		testkit.RequireSameBits(t, fmt.Sprintf("workers=%d chunks [3 %d]", w, T-3), got, all)
	}
}

func TestDenseMatchesFloat64Reference(t *testing.T) {
	const E, I, T = 32, 48, 3
	rng := rand.New(rand.NewPCG(1, 2))
	randv := func(n int, s float64) []float32 { return testkit.Gaussian(rng, n, s) }
	wg, wu, wd := randv(I*E, 0.5), randv(I*E, 0.5), randv(E*I, 0.3)
	d, err := NewDense(opfix.Matrix(t, wg, I, E), opfix.Matrix(t, wu, I, E), opfix.Matrix(t, wd, E, I), 4, 25, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := randv(T*E, 2)
	out := make([]float32, T*E)
	if err := d.Forward(out, x, T); err != nil {
		t.Fatal(err)
	}
	for tt := range T {
		h := make([]float64, I)
		for i := range I {
			var g, u float64
			for j := range E {
				g += float64(wg[i*E+j]) * float64(x[tt*E+j])
				u += float64(wu[i*E+j]) * float64(x[tt*E+j])
			}
			h[i] = 4 * math.Tanh(g/4) / (1 + math.Exp(-g)) * 25 * math.Tanh(u/25)
		}
		for o := range E {
			var s float64
			for i := range I {
				s += float64(wd[o*I+i]) * h[i]
			}
			if got := float64(out[tt*E+o]); math.Abs(got-s) > 1e-5+1e-4*math.Abs(s) {
				t.Fatalf("out[%d][%d] = %v, float64 reference %v", tt, o, got, s)
			}
		}
	}
	if _, err := NewDense(opfix.Matrix(t, wg, I, E), opfix.Matrix(t, wu, I, E), opfix.Matrix(t, wg, I, E), 4, 25, 1); err == nil {
		t.Error("mis-shaped down accepted")
	}
}
