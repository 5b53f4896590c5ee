package attention

import (
	"fmt"
	"testing"

	"github.com/k3-project/k3/internal/fmath"
	"github.com/k3-project/k3/internal/testkit/opfix"
)

func TestKDADecayFixture(t *testing.T) {
	tol := opfix.Manifest(t)
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
			rate := fmath.Exp32(alog[h]) // per HEAD (SPEC §12.1 item 1)
			for d := range D {
				i := h*D + d
				g[tt*H*D+i] = decayLog(z[tt*H*D+i], dt[i], rate, lb)
				alpha[tt*H*D+i] = fmath.Exp32(g[tt*H*D+i])
			}
		}
	}
	opfix.Compare(t, tol, "kda_decay g", g, f.F32("g", 1, T, H, D))
	opfix.Compare(t, tol, "kda_decay alpha", alpha, f.F32("alpha", 1, T, H, D))
}

func testRecurrence(t *testing.T, name string) {
	tol := opfix.Manifest(t)
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
	opfix.Compare(t, tol, name+" out", out, f.F32("out", T, H, D))
	opfix.Compare(t, tol, name+" state_out", S, f.F32("state_out", H, D, D))
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
		Q: mat(t, f.F32("q_proj", P, E), P, E), K: mat(t, f.F32("k_proj", P, E), P, E),
		V: mat(t, f.F32("v_proj", P, E), P, E), G: mat(t, f.F32("g_proj", P, E), P, E),
		B: mat(t, f.F32("b_proj", H, E), H, E), FA: mat(t, f.F32("f_a", D, E), D, E),
		FB: mat(t, f.F32("f_b", P, D), P, D), O: mat(t, f.F32("o_proj", E, P), E, P),
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
	tol := opfix.Manifest(t)
	f := opfix.Load(t, name)
	T := f.Int("T")
	k := kdaFromFixture(t, f, 1)
	st := k.NewState()
	in := f.F32("in", 1, T, 128)
	out := make([]float32, len(in))
	if err := k.Forward(out, in, T, st); err != nil {
		t.Fatal(err)
	}
	opfix.Compare(t, tol, name+" out", out, f.F32("out", 1, T, 128))
	opfix.Compare(t, tol, name+" state_out", st.S, f.F32("state_out", 1, 4, 16, 16))
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
		out := make([]float32, len(in))
		pos := 0
		for _, c := range chunks {
			if err := k.Forward(out[pos*128:(pos+c)*128], in[pos*128:(pos+c)*128], c, st); err != nil {
				t.Fatal(err)
			}
			pos += c
		}
		if pos != T {
			t.Fatalf("chunks %v cover %d of %d positions", chunks, pos, T)
		}
		return out, st
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
			sameBits(t, "out", out, refOut)
			sameBits(t, "S", st.S, refSt.S)
			sameBits(t, "conv tails", append(append(st.ConvQ, st.ConvK...), st.ConvV...),
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
	want := digest(out[4*128:], st.S, st.ConvQ, st.ConvK, st.ConvV)
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
	if got := digest(again, st.S, st.ConvQ, st.ConvK, st.ConvV); got != want {
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

// decayLog is the scalar statement of the log-decay of one channel,
// g = GateLB ⊗ σ(A_h ⊗ (z ⊕ dt)) (SPEC §5.3); prepare evaluates it over a
// head at a time through the vector forms, and these tests hold it to this.
func decayLog(z, dt, rate, lb float32) float32 {
	return lb * fmath.Sigmoid32(rate*(z+dt))
}
