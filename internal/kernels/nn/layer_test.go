package nn_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
)

// opsCoverage names the test that checks each ops/*.json fixture. The test
// below fails when a fixture file has no entry, so none is silently skipped.
var opsCoverage = map[string]string{
	"rmsnorm":    "internal/kernels/nn TestRMSNormFixture",
	"situ_glu":   "internal/kernels/nn TestSiTUGLUFixture",
	"shortconv":  "internal/kernels/nn TestShortConvFixture",
	"attnres":    "internal/kernels/nn TestAttnResFixture",
	"kda_decay":  "attention TestKDADecayFixture",
	"kda_recur1": "attention TestKDARecur1Fixture",
	"kda_recur8": "attention TestKDARecur8Fixture",
	"kda_layer1": "attention TestKDALayer1Fixture",
	"kda_layer8": "attention TestKDALayer8Fixture",
	"mla":        "attention TestMLAFixture",
	"router":     "moe TestRouterFixture",
	"moe":        "moe TestMoEFixture",
	"layer_kda":  "internal/kernels/nn TestLayerFixtures/layer_kda",
	"layer_mla":  "internal/kernels/nn TestLayerFixtures/layer_mla",
}

func TestEveryOpsFixtureIsCovered(t *testing.T) {
	files := opfix.Files(t)
	seen := map[string]bool{}
	for _, name := range files {
		seen[name] = true
		if _, ok := opsCoverage[name]; !ok {
			t.Errorf("ops/%s.json has no test: add one and list it in opsCoverage", name)
		}
	}
	for name := range opsCoverage {
		if !seen[name] {
			t.Errorf("opsCoverage lists %s, but ops/%s.json does not exist", name, name)
		}
	}
}

// tiny is the flat tiny config of ops/MANIFEST.json.
type tiny struct {
	E, H, D, K, Hm, Rq, Rkv, dn, dr, dv, NE, k, L, I, SI, block int
	lb, eps, b1, b2, scale                                      float32
	renorm, latentNorm, outGate                                 bool
}

func loadTiny(t testing.TB) tiny {
	c := opfix.Config(t)
	n := func(k string) float64 { return opfix.ConfigNum(t, c, k) }
	i := func(k string) int { return int(n(k)) }
	return tiny{
		E: i("hidden_size"), H: i("kda_num_heads"), D: i("kda_head_dim"), K: i("short_conv_kernel_size"),
		Hm: i("num_attention_heads"), Rq: i("q_lora_rank"), Rkv: i("kv_lora_rank"), dn: i("qk_nope_head_dim"),
		dr: i("qk_rope_head_dim"), dv: i("v_head_dim"), NE: i("num_experts"), k: i("num_experts_per_token"),
		L: i("routed_expert_hidden_size"), I: i("moe_intermediate_size"),
		SI: i("num_shared_experts") * i("moe_intermediate_size"), block: i("attn_res_block_size"),
		lb: float32(n("gate_lower_bound")), eps: float32(n("rms_norm_eps")), b1: float32(n("situ_beta")),
		b2: float32(n("situ_linear_beta")), scale: float32(n("routed_scaling_factor")),
		renorm: n("moe_renormalize") != 0, latentNorm: n("latent_moe_use_norm") != 0, outGate: n("mla_use_output_gate") != 0,
	}
}

type binder struct {
	t *testing.T
	f *opfix.Fixture
}

func (b binder) m(name string, rows, cols int) quant.Matrix {
	b.t.Helper()
	m, err := quant.F32FromFloats(rows, cols, b.f.F32(name, rows, cols))
	if err != nil {
		b.t.Fatal(err)
	}
	return m
}

// layer is one bound fixture layer: wiring plus mixers over fresh state.
type layer struct {
	res  *nn.Residual
	attn func(T int) nn.Mixer
	ffn  nn.Mixer
}

func bindLayer(t *testing.T, f *opfix.Fixture, c tiny, workers int) layer {
	t.Helper()
	b := binder{t, f}
	idx := f.Int("layer_idx")
	E := c.E
	pre, err := nn.NewAttnRes(f.F32("self_attention_res_norm_weight", E), f.F32("self_attention_res_proj_weight", 1, E), c.eps)
	if err != nil {
		t.Fatal(err)
	}
	post, err := nn.NewAttnRes(f.F32("mlp_res_norm_weight", E), f.F32("mlp_res_proj_weight", 1, E), c.eps)
	if err != nil {
		t.Fatal(err)
	}
	if f.Int("attn_res_block_size") != c.block || float32(f.Scalar("rms_eps")) != c.eps || f.Int("hidden") != E {
		t.Fatal("layer fixture scalars disagree with MANIFEST.json")
	}
	l := layer{res: &nn.Residual{
		InputNorm: nn.F32(f.F32("input_layernorm_weight", E)), PostNorm: nn.F32(f.F32("post_attention_layernorm_weight", E)),
		AttnRes: pre, MLPRes: post, Eps: c.eps, Boundary: idx%c.block == 0,
	}}
	if f.Scalar("is_mla") != 0 {
		dq := c.dn + c.dr
		m, err := attention.NewMLA(attention.MLAConfig{Hidden: E, Heads: c.Hm, QLoRA: c.Rq, KVLoRA: c.Rkv, NoPE: c.dn,
			Rope: c.dr, VHead: c.dv, OutGate: c.outGate, RMSEps: c.eps, Workers: workers}, attention.MLAWeights{
			QA: b.m("self_attn_q_a_proj_weight", c.Rq, E), QANorm: f.F32("self_attn_q_a_layernorm_weight", c.Rq),
			QB: b.m("self_attn_q_b_proj_weight", c.Hm*dq, c.Rq), KVA: b.m("self_attn_kv_a_proj_with_mqa_weight", c.Rkv+c.dr, E),
			KVANorm: f.F32("self_attn_kv_a_layernorm_weight", c.Rkv), KVB: b.m("self_attn_kv_b_proj_weight", c.Hm*(c.dn+c.dv), c.Rkv),
			O: b.m("self_attn_o_proj_weight", E, c.Hm*c.dv), G: b.m("self_attn_g_proj_weight", c.Hm*c.dv, E),
		})
		if err != nil {
			t.Fatal(err)
		}
		cache := m.NewCache()
		l.attn = func(int) nn.Mixer {
			return func(dst, x []float32, T, _ int) error { return m.Forward(dst, x, T, cache) }
		}
	} else {
		P := c.H * c.D
		k, err := attention.NewKDA(attention.KDAConfig{Hidden: E, Heads: c.H, HeadDim: c.D, ConvK: c.K, GateLB: c.lb,
			RMSEps: c.eps, Workers: workers}, attention.KDAWeights{
			Q: b.m("self_attn_q_proj_weight", P, E), K: b.m("self_attn_k_proj_weight", P, E),
			V: b.m("self_attn_v_proj_weight", P, E), G: b.m("self_attn_g_proj_weight", P, E),
			B: b.m("self_attn_b_proj_weight", c.H, E), FA: b.m("self_attn_f_a_proj_weight", c.D, E),
			FB: b.m("self_attn_f_b_proj_weight", P, c.D), O: b.m("self_attn_o_proj_weight", E, P),
			QConv: f.F32("self_attn_q_conv1d_weight", P, 1, c.K), KConv: f.F32("self_attn_k_conv1d_weight", P, 1, c.K),
			VConv: f.F32("self_attn_v_conv1d_weight", P, 1, c.K), ALog: f.F32("self_attn_A_log", c.H),
			DtBias: f.F32("self_attn_dt_bias", P), ONorm: f.F32("self_attn_o_norm_weight", c.D),
		})
		if err != nil {
			t.Fatal(err)
		}
		st := k.NewState()
		l.attn = func(int) nn.Mixer {
			return func(dst, x []float32, T, _ int) error { return k.Forward(dst, x, T, st) }
		}
	}
	experts := make([]moe.Expert, c.NE)
	for e := range experts {
		p := "mlp_experts_" + strconv.Itoa(e) + "_"
		experts[e] = moe.Expert{W1: b.m(p+"w1_weight", c.I, c.L), W3: b.m(p+"w3_weight", c.I, c.L), W2: b.m(p+"w2_weight", c.L, c.I)}
	}
	mo, err := moe.New(moe.Config{Layer: idx, Hidden: E, Latent: c.L, Inter: c.I, TopK: c.k, RoutedScale: c.scale,
		Renorm: c.renorm, LatentNorm: c.latentNorm, Beta1: c.b1, Beta2: c.b2, RMSEps: c.eps, Workers: workers}, moe.Weights{
		Gate: b.m("mlp_gate_weight", c.NE, E), Bias: f.F32("mlp_e_score_correction_bias", c.NE),
		Down: b.m("mlp_down_weight", c.L, E), Up: b.m("mlp_up_weight", E, c.L), Norm: f.F32("mlp_norm_weight", c.L),
		SharedGate: b.m("mlp_shared_w1_weight", c.SI, E), SharedUp: b.m("mlp_shared_w3_weight", c.SI, E),
		SharedDown: b.m("mlp_shared_w2_weight", E, c.SI),
	}, moe.NewMemExperts(map[int][]moe.Expert{idx: experts}))
	if err != nil {
		t.Fatal(err)
	}
	l.ffn = func(dst, x []float32, T, _ int) error { return mo.Forward(dst, x, T) }
	return l
}

// streamFor builds the stream of positions [lo, hi) of a layer fixture.
func streamFor(t *testing.T, f *opfix.Fixture, E, lo, hi int) *nn.Stream {
	T := f.Tensor("in").Shape[1]
	in := f.F32("in", 1, T, E)
	nb := f.Tensor("block_residual_in").Shape[1]
	br := f.F32("block_residual_in", T, nb, E)
	n := hi - lo
	s, err := nn.NewStream(append([]float32(nil), in[lo*E:hi*E]...), n, E)
	if err != nil {
		t.Fatal(err)
	}
	for b := range nb {
		blk := make([]float32, n*E)
		for p := lo; p < hi; p++ {
			copy(blk[(p-lo)*E:(p-lo+1)*E], br[(p*nb+b)*E:(p*nb+b+1)*E])
		}
		s.Blocks = append(s.Blocks, blk)
	}
	return s
}

// flatBlocks returns the stream's blocks as [T][nb][E] (the fixture layout).
func flatBlocks(s *nn.Stream) []float32 {
	out := make([]float32, 0, s.T*len(s.Blocks)*s.E)
	for p := range s.T {
		for _, b := range s.Blocks {
			out = append(out, b[p*s.E:(p+1)*s.E]...)
		}
	}
	return out
}

// runLayer binds the layer fixture f and runs it over the fixture's input
// on workers, returning the positions and the stream after the layer.
func runLayer(t *testing.T, f *opfix.Fixture, c tiny, workers int) (int, *nn.Stream) {
	t.Helper()
	T := f.Tensor("in").Shape[1]
	l := bindLayer(t, f, c, workers)
	s := streamFor(t, f, c.E, 0, T)
	if err := l.res.Forward(s, l.attn(T), l.ffn, workers); err != nil {
		t.Fatal(err)
	}
	return T, s
}

func TestLayerFixtures(t *testing.T) {
	c := loadTiny(t)
	for _, name := range []string{"layer_kda", "layer_mla"} {
		t.Run(name, func(t *testing.T) {
			f := opfix.Load(t, name)
			T, s := runLayer(t, f, c, 1)
			opfix.Compare(t, f.Tol, name+" out", s.H, f.F32("out", 1, T, c.E))
			nbOut := f.Tensor("block_residual_out").Shape[1]
			if len(s.Blocks) != nbOut {
				t.Fatalf("%d blocks after the layer, want %d", len(s.Blocks), nbOut)
			}
			opfix.Compare(t, f.Tol, name+" block_residual_out", flatBlocks(s), f.F32("block_residual_out", T, nbOut, c.E))
		})
	}
}

// E1 at layer level: all positions at once ≡ one at a time (state carried
// in the mixers, a fresh stream per call) ≡ chunks ≡ worker counts.
func TestLayerChunkingBitIdentical(t *testing.T) {
	c := loadTiny(t)
	for _, name := range []string{"layer_kda", "layer_mla"} {
		f := opfix.Load(t, name)
		T := f.Tensor("in").Shape[1]
		run := func(workers int, chunks []int) []float32 {
			l := bindLayer(t, f, c, workers)
			var out []float32
			pos := 0
			for _, n := range chunks {
				s := streamFor(t, f, c.E, pos, pos+n)
				if err := l.res.Forward(s, l.attn(n), l.ffn, workers); err != nil {
					t.Fatal(err)
				}
				out = append(out, s.H...)
				pos += n
			}
			return out
		}
		ref := run(1, []int{T})
		for _, tc := range []struct {
			workers int
			chunks  []int
		}{{1, []int{1, 1, 1, 1}}, {1, []int{1, 3}}, {2, []int{T}}, {2, []int{2, 1, 1}}} {
			got := run(tc.workers, tc.chunks)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
					t.Fatalf("%s workers=%d chunks=%v: out[%d] = %v, want %v", name, tc.workers, tc.chunks, i, got[i], ref[i])
				}
			}
		}
		t.Logf("%s: bit-identical for all chunkings and worker counts", name)
	}
}

// layerDigests pins the exact output bits of the two layer fixtures. The
// same values must come out of the default build (AVX2 kernels on amd64)
// and of `go test -tags purego` (pure-Go twins), and on every GOARCH: this
// is the cross-build half of E1 for everything the layer composes (dot and
// quant kernels, fmath, the evaluation orders here). A deliberate change of
// an evaluation order must update them.
var layerDigests = map[string]uint64{
	"layer_kda": 0x7a61da214c07fccf,
	"layer_mla": 0x29fbc085818c3a85,
}

func TestLayerDigestsAcrossBuilds(t *testing.T) {
	c := loadTiny(t)
	for name, want := range layerDigests {
		_, s := runLayer(t, opfix.Load(t, name), c, 2)
		if got := testkit.Digest(s.H); got != want {
			t.Errorf("%s output digest %#x, recorded %#x", name, got, want)
		}
	}
}
