package k3

import (
	"fmt"
	"sync"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/trunk"
)

// build runs the constructors over the loaded tensors. It is called only when the walk and the
// load reported nothing, so every tensor the configuration needs has its value.
func (m *Model) build(b *binder) error {
	top := index(b.model)
	m.embed, m.lmHead = top.mat("model.embed_tokens.weight"), top.mat("lm_head.weight")
	m.norm = top.gain("model.norm.weight")
	if _, ok := m.embed.(quant.RowDecoder); !ok {
		return &BindError{Dir: m.dir, Mismatched: []string{fmt.Sprintf("%s: format %v cannot gather rows", top["model.embed_tokens.weight"].spec.Name, m.embed.Format())}}
	}
	m.layers = make([]layer, m.nlayers)
	var buildErrs []string
	for l := range m.layers {
		if err := m.buildLayer(b, l); err != nil {
			buildErrs = append(buildErrs, err.Error())
		}
	}
	if len(buildErrs) > 0 {
		// Every tensor was present with the right shape, yet a layer refused its weights:
		// report it like a mismatch so the caller still gets one complete list.
		return &BindError{Dir: m.dir, Mismatched: buildErrs}
	}
	var err error
	if m.outAgg, err = nn.NewAttnRes(top.vec("model.output_attn_res_norm.weight"), top.vec("model.output_attn_res_proj.weight"), m.eps); err != nil {
		return &BindError{Dir: m.dir, Mismatched: []string{"output_attn_res: " + err.Error()}}
	}
	m.info = m.computeInfo(b)
	return nil
}

// buildLayer builds layer l from its loaded tensors.
func (m *Model) buildLayer(b *binder, l int) error {
	c := &m.cfg
	v := index(b.layers[l])
	E := c.Hidden
	lay := &m.layers[l]
	var err error
	lay.res = nn.Residual{InputNorm: v.gain("input_layernorm.weight"), PostNorm: v.gain("post_attention_layernorm.weight"),
		Eps: m.eps, Boundary: c.IsBoundary(l)}
	if lay.res.AttnRes, err = nn.NewAttnRes(v.vec("self_attention_res_norm.weight"), v.vec("self_attention_res_proj.weight"), m.eps); err != nil {
		return fmt.Errorf("layer %d self_attention_res: %w", l, err)
	}
	if lay.res.MLPRes, err = nn.NewAttnRes(v.vec("mlp_res_norm.weight"), v.vec("mlp_res_proj.weight"), m.eps); err != nil {
		return fmt.Errorf("layer %d mlp_res: %w", l, err)
	}
	if c.IsMLA(l) {
		lay.mla, err = attention.NewMLA(attention.MLAConfig{
			Hidden: E, Heads: c.MLAHeads, QLoRA: c.QLoRA, KVLoRA: c.KVLoRA, NoPE: c.QKNope, Rope: c.QKRope,
			VHead: c.VHead, OutGate: c.MLAOutGate, RMSEps: m.eps, Workers: m.threads, Pool: m.pool,
		}, attention.MLAWeights{
			QA: v.mat("self_attn.q_a_proj.weight"), QANorm: v.vec("self_attn.q_a_layernorm.weight"),
			QB: v.mat("self_attn.q_b_proj.weight"), KVA: v.mat("self_attn.kv_a_proj_with_mqa.weight"),
			KVANorm: v.vec("self_attn.kv_a_layernorm.weight"), KVB: v.mat("self_attn.kv_b_proj.weight"),
			G: v.mat("self_attn.g_proj.weight"), O: v.mat("self_attn.o_proj.weight"),
		})
	} else {
		lay.kda, err = attention.NewKDA(attention.KDAConfig{
			Hidden: E, Heads: c.KDAHeads, HeadDim: c.KDAHeadDim, ConvK: c.ConvK, GateLB: float32(c.GateLB),
			RMSEps: m.eps, Workers: m.threads, Pool: m.pool,
		}, attention.KDAWeights{
			Q: v.mat("self_attn.q_proj.weight"), K: v.mat("self_attn.k_proj.weight"), V: v.mat("self_attn.v_proj.weight"),
			G: v.mat("self_attn.g_proj.weight"), FA: v.mat("self_attn.f_a_proj.weight"), FB: v.mat("self_attn.f_b_proj.weight"),
			B: v.mat("self_attn.b_proj.weight"), O: v.mat("self_attn.o_proj.weight"),
			QConv: v.vec("self_attn.q_conv1d.weight"), KConv: v.vec("self_attn.k_conv1d.weight"), VConv: v.vec("self_attn.v_conv1d.weight"),
			ALog: v.vec("self_attn.A_log"), DtBias: v.vec("self_attn.dt_bias"), ONorm: v.vec("self_attn.o_norm.weight"),
		})
	}
	if err != nil {
		return fmt.Errorf("layer %d self_attn: %w", l, err)
	}
	if lay.ffn, err = m.buildFFN(b, v, l); err != nil {
		return fmt.Errorf("layer %d ffn: %w", l, err)
	}
	return nil
}

// ffn is a layer's feed-forward block: the dense SiTU-GLU MLP or the LatentMoE, run with the
// session's scratch memory.
type ffn interface {
	ForwardWith(dst, x []float32, T int, ws *moe.Workspace) error
}

// latentMoE adapts moe.MoE to ffn (the engine does not ask for the routing picks). With a
// lookahead it first predicts the next MoE layer's experts from this layer's input and asks the
// expert store to read them in the background (router lookahead, §9.4's speculation made
// from the hidden state instead of the previous token).
type latentMoE struct {
	*moe.MoE
	look *lookahead // nil: off
}

// lookahead is the prediction of the next MoE layer's experts.
type lookahead struct {
	layer   int         // the next MoE layer
	router  *moe.Router // its router, resident (a streamed router would be read out of walk order)
	n       int
	store   prefetcher
	workers int
	pool    sync.Pool // *lookScratch
}

type prefetcher interface{ Prefetch(layer int, ids []int) }

type lookScratch struct {
	ids          []int
	logits, pick []float32
}

func (f latentMoE) ForwardWith(dst, x []float32, T int, ws *moe.Workspace) error {
	if f.look != nil && T == 1 {
		f.look.predict(x)
	}
	return f.ForwardRoutedWith(dst, x, T, nil, ws)
}

// predict never fails the forward: a prediction is advisory, and routing on data the layer
// itself will refuse (NaN) leaves nothing to prefetch.
func (l *lookahead) predict(x []float32) {
	sc, _ := l.pool.Get().(*lookScratch)
	if sc == nil {
		ne := l.router.Experts()
		sc = &lookScratch{ids: make([]int, l.n), logits: make([]float32, ne), pick: make([]float32, 2*ne)}
	}
	if l.router.Predict(sc.ids, x, l.workers, sc.logits, sc.pick) == nil {
		l.store.Prefetch(l.layer, sc.ids)
	}
	l.pool.Put(sc)
}

// buildFFN builds layer l's FFN from its loaded tensors v.
func (m *Model) buildFFN(b *binder, v values, l int) (ffn, error) {
	c := &m.cfg
	E := c.Hidden
	beta1, beta2 := float32(c.SiTUBeta), float32(c.SiTULinearBeta)
	if c.IsDense(l) {
		return moe.NewDensePool(v.mat("mlp.gate_proj.weight"), v.mat("mlp.up_proj.weight"), v.mat("mlp.down_proj.weight"),
			beta1, beta2, m.threads, m.pool)
	}
	p := "block_sparse_moe."
	w := moe.Weights{
		Gate: v.mat(p + "gate.weight"), Bias: v.vec(p + "gate.e_score_correction_bias"),
		Down: v.mat(p + "routed_expert_down_proj.weight"), Up: v.mat(p + "routed_expert_up_proj.weight"),
		Norm:       v.vec(p + "routed_expert_norm.weight"),
		SharedGate: v.mat(p + "shared_experts.gate_proj.weight"), SharedUp: v.mat(p + "shared_experts.up_proj.weight"),
		SharedDown: v.mat(p + "shared_experts.down_proj.weight"),
	}
	var src moe.ExpertSource
	if b.cachedExperts {
		src = m.experts
	} else {
		experts := make([]moe.Expert, c.NumExperts)
		for e, ts := range b.experts[l] {
			experts[e] = moe.Expert{W1: ts[0].mat, W2: ts[2].mat, W3: ts[4].mat} // layout.Expert's order
		}
		var mem moe.ExpertSource = moe.NewMemExperts(map[int][]moe.Expert{l: experts})
		if m.tracer != nil {
			mem = tracedExperts{mem, m.tracer}
		}
		src = mem
	}
	mo, err := moe.New(moe.Config{
		Layer: l, Hidden: E, Latent: c.Latent, Inter: c.MoEInter, TopK: c.TopK,
		RoutedScale: float32(c.RoutedScale), Renorm: c.MoERenorm, LatentNorm: c.LatentNorm,
		Beta1: beta1, Beta2: beta2, RMSEps: m.eps, Workers: m.threads, Pool: m.pool,
	}, w, src)
	if err != nil {
		return nil, err
	}
	return latentMoE{MoE: mo}, nil
}

// linkLookahead gives every MoE layer the next MoE layer's router, when router lookahead is on
// and that router's gate is resident.
func (m *Model) linkLookahead(n int) {
	if n <= 0 || m.experts == nil {
		return
	}
	var next *latentMoE
	for l := len(m.layers) - 1; l >= 0; l-- {
		f, ok := m.layers[l].ffn.(latentMoE)
		if !ok {
			continue
		}
		if next != nil {
			r := next.Router()
			if _, streamed := r.Gate().(*trunk.Matrix); !streamed {
				f.look = &lookahead{layer: next.Config().Layer, router: r, n: min(n, r.Experts()), store: m.experts, workers: m.threads}
				m.layers[l].ffn = f
			}
		}
		next = &f
	}
}

// tracedExperts reports every requested expert to the tracer (the cache store does this itself).
type tracedExperts struct {
	moe.ExpertSource
	t Tracer
}

func (s tracedExperts) Experts(layer int, ids []int, dst []moe.Expert) ([]moe.Expert, func(), error) {
	for _, id := range ids {
		s.t.ExpertRequest(layer, id)
	}
	return s.ExpertSource.Experts(layer, ids, dst)
}
