package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/fmath"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
)

// decayLog is the scalar statement of the log-decay of one channel,
// g = GateLB ⊗ σ(A_h ⊗ (z ⊕ dt)) (§5.3); prepare evaluates it over a
// head at a time through the vector forms, and these tests hold it to this.
func decayLog(z, dt, rate, lb float32) float32 {
	return lb * fmath.Sigmoid32(rate*(z+dt))
}

func TestKDADecayFixture(t *testing.T) {
	f := opfix.Load(t, "kda_decay")
	const T, H, D = 4, 4, 16
	z := f.F32("z", 1, T, H*D)
	alog := f.F32("A_log", H)
	dt := f.F32("dt_bias", H*D)
	lb := float32(f.Scalar("lower_bound"))
	g := make([]float32, T*H*D)
	alpha := make([]float32, T*H*D)
	for tt := range T {
		for h := range H {
			rate := fmath.Exp32(alog[h]) // per HEAD (§12.1 item 1)
			for d := range D {
				i := h*D + d
				g[tt*H*D+i] = decayLog(z[tt*H*D+i], dt[i], rate, lb)
				alpha[tt*H*D+i] = fmath.Exp32(g[tt*H*D+i])
			}
		}
	}
	opfix.Compare(t, f.Tol, "kda_decay g", g, f.F32("g", 1, T, H, D))
	opfix.Compare(t, f.Tol, "kda_decay alpha", alpha, f.F32("alpha", 1, T, H, D))
}

func testRecurrence(t *testing.T, name string) {
	f := opfix.Load(t, name)
	T, H, D := f.Int("T"), f.Int("H"), f.Int("d_k")
	if f.Int("d_v") != D {
		t.Fatalf("d_v %d != d_k %d", f.Int("d_v"), D)
	}
	qs := float32(f.Scalar("q_scale"))
	q := f.F32("q", T, H, D)
	k := f.F32("k", T, H, D)
	v := f.F32("v", T, H, D)
	alpha := f.F32("alpha", T, H, D)
	beta := f.F32("beta", T, H)
	for i := range q {
		q[i] = q[i] * qs // the fixture's q is not pre-scaled
	}
	S := make([]float32, H*D*D)
	out := make([]float32, T*H*D)
	u := make([]float32, D)
	for tt := range T {
		for h := range H {
			o := tt*H*D + h*D
			kdaStep(S[h*D*D:(h+1)*D*D], q[o:o+D], k[o:o+D], v[o:o+D], alpha[o:o+D], beta[tt*H+h], out[o:o+D], u)
		}
	}
	opfix.Compare(t, f.Tol, name+" out", out, f.F32("out", T, H, D))
	opfix.Compare(t, f.Tol, name+" state_out", S, f.F32("state_out", H, D, D))
}

func TestKDARecur1Fixture(t *testing.T) { testRecurrence(t, "kda_recur1") }
func TestKDARecur8Fixture(t *testing.T) { testRecurrence(t, "kda_recur8") }

// kdaFromFixture binds the whole-block KDA fixture (kda_layer1/8).
func kdaFromFixture(t *testing.T, f *opfix.Fixture, workers int) *KDA {
	t.Helper()
	const E = 128
	H, D, K := f.Int("H"), f.Int("d_k"), f.Int("conv_k")
	P := H * D
	cfg := KDAConfig{Hidden: E, Heads: H, HeadDim: D, ConvK: K,
		GateLB: float32(f.Scalar("lower_bound")), RMSEps: float32(f.Scalar("rms_eps")), Workers: workers}
	w := KDAWeights{
		Q: f.Matrix("q_proj", P, E), K: f.Matrix("k_proj", P, E),
		V: f.Matrix("v_proj", P, E), G: f.Matrix("g_proj", P, E),
		B: f.Matrix("b_proj", H, E), FA: f.Matrix("f_a", D, E),
		FB: f.Matrix("f_b", P, D), O: f.Matrix("o_proj", E, P),
		QConv: f.F32("q_conv", P, 1, K), KConv: f.F32("k_conv", P, 1, K), VConv: f.F32("v_conv", P, 1, K),
		ALog: f.F32("A_log", H), DtBias: f.F32("dt_bias", P), ONorm: f.F32("o_norm", D),
	}
	k, err := NewKDA(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testKDALayer(t *testing.T, name string) {
	f := opfix.Load(t, name)
	T := f.Int("T")
	k := kdaFromFixture(t, f, 1)
	st := k.NewState()
	in := f.F32("in", 1, T, 128)
	out := make([]float32, len(in))
	if err := k.Forward(out, in, T, st); err != nil {
		t.Fatal(err)
	}
	opfix.Compare(t, f.Tol, name+" out", out, f.F32("out", 1, T, 128))
	opfix.Compare(t, f.Tol, name+" state_out", st.S, f.F32("state_out", 1, 4, 16, 16))
}

func TestKDALayer1Fixture(t *testing.T) { testKDALayer(t, "kda_layer1") }
func TestKDALayer8Fixture(t *testing.T) { testKDALayer(t, "kda_layer8") }

// E1: all at once ≡ one by one ≡ any chunking ≡ any worker count, for the
// outputs and the whole carried state (S and the three conv tails).
func TestKDAChunkingBitIdentical(t *testing.T) {
	f := opfix.Load(t, "kda_layer8")
	T := f.Int("T")
	in := f.F32("in", 1, T, 128)
	run := func(workers int, chunks []int) ([]float32, *KDAState) {
		k := kdaFromFixture(t, f, workers)
		st := k.NewState()
		return inChunks(t, 128, in, chunks, func(dst, x []float32, n int) error { return k.Forward(dst, x, n, st) }), st
	}
	refOut, refSt := run(1, []int{T})
	for _, tc := range []struct {
		workers int
		chunks  []int
	}{
		{1, []int{1, 1, 1, 1, 1, 1, 1, 1}}, {1, []int{3, 5}}, {1, []int{1, 6, 1}},
		{2, []int{T}}, {2, []int{1, 1, 1, 1, 1, 1, 1, 1}}, {4, []int{2, 2, 4}},
	} {
		t.Run(fmt.Sprintf("w%d_%v", tc.workers, tc.chunks), func(t *testing.T) {
			out, st := run(tc.workers, tc.chunks)
			testkit.RequireSameBits(t, "out", out, refOut)
			testkit.RequireSameBits(t, "S", st.S, refSt.S)
			testkit.RequireSameBits(t, "conv tails", append(append(st.ConvQ, st.ConvK...), st.ConvV...),
				append(append(refSt.ConvQ, refSt.ConvK...), refSt.ConvV...))
		})
	}
}

// A snapshot taken mid-sequence and restored continues bit-identically.
func TestKDASnapshotRestore(t *testing.T) {
	f := opfix.Load(t, "kda_layer8")
	in := f.F32("in", 1, 8, 128)
	k := kdaFromFixture(t, f, 1)
	st := k.NewState()
	out := make([]float32, 8*128)
	if err := k.Forward(out[:4*128], in[:4*128], 4, st); err != nil {
		t.Fatal(err)
	}
	snap := st.Clone()
	if err := k.Forward(out[4*128:], in[4*128:], 4, st); err != nil {
		t.Fatal(err)
	}
	want := testkit.Digest(out[4*128:], st.S, st.ConvQ, st.ConvK, st.ConvV)
	// Diverge, then restore and replay.
	if err := k.Forward(out[4*128:5*128], in[:128], 1, st); err != nil {
		t.Fatal(err)
	}
	if err := st.CopyFrom(snap); err != nil {
		t.Fatal(err)
	}
	again := make([]float32, 4*128)
	if err := k.Forward(again, in[4*128:], 4, st); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Digest(again, st.S, st.ConvQ, st.ConvK, st.ConvV); got != want {
		t.Fatalf("restored state continues differently: digest %x, want %x", got, want)
	}
	st.Reset()
	for _, v := range st.S {
		if v != 0 {
			t.Fatal("Reset left a non-zero state")
		}
	}
}

func TestKDABadInput(t *testing.T) {
	f := opfix.Load(t, "kda_layer1")
	k := kdaFromFixture(t, f, 1)
	st := k.NewState()
	if err := k.Forward(make([]float32, 128), make([]float32, 127), 1, st); err == nil {
		t.Error("short input accepted")
	}
	if err := k.Forward(make([]float32, 128), make([]float32, 128), 1, &KDAState{}); err == nil {
		t.Error("mismatched state accepted")
	}
	if err := k.Forward(make([]float32, 128), make([]float32, 128), 0, st); err == nil {
		t.Error("T = 0 accepted")
	}
}

// α = 1 exactly (σ underflowing to 0) is legitimate, not an error; the
// lower bound is reached for large arguments.
func TestKDADecayExtremes(t *testing.T) {
	if g := decayLog(-200, 0, 1, -5); g != 0 || fmath.Exp32(g) != 1 {
		t.Errorf("saturated decay: g = %v, α = %v; want 0 and 1", g, fmath.Exp32(g))
	}
	if g := decayLog(200, 0, 1, -5); g != -5 {
		t.Errorf("lower bound: g = %v, want −5", g)
	}
}

func TestBindErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	good := KDAWeights{Q: randBF16(t, r, 8, 4), K: randBF16(t, r, 8, 4), V: randBF16(t, r, 8, 4), G: randBF16(t, r, 8, 4),
		B: randBF16(t, r, 2, 4), FA: randBF16(t, r, 4, 4), FB: randBF16(t, r, 8, 4), O: randBF16(t, r, 4, 8),
		QConv: make([]float32, 16), KConv: make([]float32, 16), VConv: make([]float32, 16),
		ALog: make([]float32, 4), DtBias: make([]float32, 8), ONorm: make([]float32, 4)}
	cfg := KDAConfig{Hidden: 4, Heads: 2, HeadDim: 4, ConvK: 2, GateLB: -5, RMSEps: 1e-5}
	if _, err := NewKDA(cfg, good); err != nil {
		t.Fatalf("valid KDA refused: %v", err)
	}
	for name, mutate := range map[string]func(*KDAWeights, *KDAConfig){
		"o_proj transposed": func(w *KDAWeights, _ *KDAConfig) { w.O = randBF16(t, r, 8, 4) },
		"missing g_proj":    func(w *KDAWeights, _ *KDAConfig) { w.G = nil },
		"short A_log":       func(w *KDAWeights, _ *KDAConfig) { w.ALog = w.ALog[:1] },
		"short conv taps":   func(w *KDAWeights, _ *KDAConfig) { w.KConv = w.KConv[:15] },
		"short dt_bias":     func(w *KDAWeights, _ *KDAConfig) { w.DtBias = w.DtBias[:7] },
		"positive bound":    func(_ *KDAWeights, c *KDAConfig) { c.GateLB = 1 },
		"zero eps":          func(_ *KDAWeights, c *KDAConfig) { c.RMSEps = 0 },
	} {
		w, c := good, cfg
		mutate(&w, &c)
		if _, err := NewKDA(c, w); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
