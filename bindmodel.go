package k3

import (
	"fmt"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/internal/nn"
	"github.com/k3-project/k3/quant"
)

// build runs the constructors over the loaded tensors. It is called only when the walk and the
// load reported nothing, so every tensor the configuration needs has its value.
func (m *Model) build(b *binder) error {
	top := index(b.model)
	m.embed, m.lmHead = top.mat("model.embed_tokens.weight"), top.mat("lm_head.weight")
	m.norm = top.vec("model.norm.weight")
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
	lay.res = nn.Residual{InputNorm: v.vec("input_layernorm.weight"), PostNorm: v.vec("post_attention_layernorm.weight"),
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
