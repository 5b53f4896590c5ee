package k3

import (
	"fmt"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/internal/nn"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/trunk"
)

// bind binds every tensor of the text model, collecting all problems first. With b.describe it
// only checks and lists them (see binder).
func (m *Model) bind(b *binder) error {
	c := &m.cfg
	E, V := c.Hidden, c.Vocab
	b.item = trunk.Embed
	m.embed = b.matrix(prefixModel+"embed_tokens.weight", V, E, classEmbedHead)
	b.item = trunk.Head
	m.lmHead = b.matrix(nameLMHead, V, E, classEmbedHead)
	m.norm = b.vector(prefixModel+"norm.weight", E, classEmbedHead)
	outNorm := b.vector(prefixModel+"output_attn_res_norm.weight", E, classEmbedHead)
	outProj := b.vector(prefixModel+"output_attn_res_proj.weight", E, classEmbedHead, []int{1, E})

	if m.embed != nil {
		if _, ok := m.embed.(quant.RowDecoder); !ok {
			b.mismatched = append(b.mismatched, fmt.Sprintf("%sembed_tokens.weight: format %v cannot gather rows", prefixModel, m.embed.Format()))
		}
	}
	m.layers = make([]layer, m.nlayers)
	var buildErrs []string
	for l := range m.layers {
		if err := m.bindLayer(b, l); err != nil {
			buildErrs = append(buildErrs, err.Error())
		}
	}
	if err := b.err(m.dir); err != nil {
		return err
	}
	if b.describe {
		return nil
	}
	if len(buildErrs) > 0 {
		// Every tensor was present with the right shape, yet a layer refused its weights:
		// report it like a mismatch so the caller still gets one complete list.
		return &BindError{Dir: m.dir, Mismatched: buildErrs}
	}
	var err error
	if m.outAgg, err = nn.NewAttnRes(outNorm, outProj, m.eps); err != nil {
		return &BindError{Dir: m.dir, Mismatched: []string{"output_attn_res: " + err.Error()}}
	}
	m.info = m.computeInfo(b)
	return nil
}

// bindLayer binds layer l. It returns an error only for problems found after all of the layer's
// tensors were located and shape-checked (a constructor refusing the bound weights).
func (m *Model) bindLayer(b *binder, l int) error {
	c := &m.cfg
	lp := layerPrefix(l)
	E := c.Hidden
	lay := &m.layers[l]
	startMissing, startMis := len(b.missing), len(b.mismatched)
	b.item = l

	inNorm := b.vector(lp+"input_layernorm.weight", E, classTrunk)
	postNorm := b.vector(lp+"post_attention_layernorm.weight", E, classTrunk)
	arNorm := b.vector(lp+"self_attention_res_norm.weight", E, classTrunk)
	arProj := b.vector(lp+"self_attention_res_proj.weight", E, classTrunk, []int{1, E})
	mrNorm := b.vector(lp+"mlp_res_norm.weight", E, classTrunk)
	mrProj := b.vector(lp+"mlp_res_proj.weight", E, classTrunk, []int{1, E})

	a := lp + "self_attn."
	var kw attention.KDAWeights
	var mw attention.MLAWeights
	if c.IsMLA(l) {
		Hm, dq := c.MLAHeads, c.QKNope+c.QKRope
		// Matrices are bound in the order MLA.ForwardWith first uses them, which is the order
		// a streamed trunk reads them in (TestStreamWalkOrder checks it). kv_b_proj is read by
		// rows from every head, so it streams whole.
		mw.QA = b.matrix(a+"q_a_proj.weight", c.QLoRA, E, classTrunk)
		mw.QANorm = b.vector(a+"q_a_layernorm.weight", c.QLoRA, classTrunk)
		mw.QB = b.matrix(a+"q_b_proj.weight", Hm*dq, c.QLoRA, classTrunk)
		mw.KVA = b.matrix(a+"kv_a_proj_with_mqa.weight", c.KVLoRA+c.QKRope, E, classTrunk)
		mw.KVANorm = b.vector(a+"kv_a_layernorm.weight", c.KVLoRA, classTrunk)
		mw.KVB = b.matrixOf(a+"kv_b_proj.weight", Hm*(c.QKNope+c.VHead), c.KVLoRA, classTrunk, true)
		if c.MLAOutGate {
			mw.G = b.matrix(a+"g_proj.weight", Hm*c.VHead, E, classTrunk)
		}
		mw.O = b.matrix(a+"o_proj.weight", E, Hm*c.VHead, classTrunk)
	} else {
		H, D := c.KDAHeads, c.KDAHeadDim
		P := H * D
		// In the order KDA.ForwardWith first uses them (see the MLA case).
		kw.Q = b.matrix(a+"q_proj.weight", P, E, classTrunk)
		kw.K = b.matrix(a+"k_proj.weight", P, E, classTrunk)
		kw.V = b.matrix(a+"v_proj.weight", P, E, classTrunk)
		kw.G = b.matrix(a+"g_proj.weight", P, E, classTrunk)
		kw.FA = b.matrix(a+"f_a_proj.weight", D, E, classTrunk)
		kw.FB = b.matrix(a+"f_b_proj.weight", P, D, classTrunk)
		kw.B = b.matrix(a+"b_proj.weight", H, E, classTrunk)
		kw.O = b.matrix(a+"o_proj.weight", E, P, classTrunk)
		vecs := attention.KDAWeights{
			QConv:  b.conv(a+"q_conv1d.weight", P, c.ConvK),
			KConv:  b.conv(a+"k_conv1d.weight", P, c.ConvK),
			VConv:  b.conv(a+"v_conv1d.weight", P, c.ConvK),
			ALog:   b.aLog(a+"A_log", H, D),
			DtBias: b.vector(a+"dt_bias", P, classTrunk),
			ONorm:  b.vector(a+"o_norm.weight", D, classTrunk),
		}
		kw.QConv, kw.KConv, kw.VConv, kw.ALog, kw.DtBias, kw.ONorm = vecs.QConv, vecs.KConv, vecs.VConv, vecs.ALog, vecs.DtBias, vecs.ONorm
	}
	f := m.bindFFN(b, l)
	if b.describe || len(b.missing) > startMissing || len(b.mismatched) > startMis {
		return nil // already reported (constructors would only repeat it), or nothing to build
	}

	var err error
	lay.res = nn.Residual{InputNorm: inNorm, PostNorm: postNorm, Eps: m.eps, Boundary: c.IsBoundary(l)}
	if lay.res.AttnRes, err = nn.NewAttnRes(arNorm, arProj, m.eps); err != nil {
		return fmt.Errorf("layer %d self_attention_res: %w", l, err)
	}
	if lay.res.MLPRes, err = nn.NewAttnRes(mrNorm, mrProj, m.eps); err != nil {
		return fmt.Errorf("layer %d mlp_res: %w", l, err)
	}
	if c.IsMLA(l) {
		lay.mla, err = attention.NewMLA(attention.MLAConfig{
			Hidden: E, Heads: c.MLAHeads, QLoRA: c.QLoRA, KVLoRA: c.KVLoRA, NoPE: c.QKNope, Rope: c.QKRope,
			VHead: c.VHead, OutGate: c.MLAOutGate, RMSEps: m.eps, Workers: m.threads, Pool: m.pool,
		}, mw)
	} else {
		lay.kda, err = attention.NewKDA(attention.KDAConfig{
			Hidden: E, Heads: c.KDAHeads, HeadDim: c.KDAHeadDim, ConvK: c.ConvK, GateLB: float32(c.GateLB),
			RMSEps: m.eps, Workers: m.threads, Pool: m.pool,
		}, kw)
	}
	if err != nil {
		return fmt.Errorf("layer %d self_attn: %w", l, err)
	}
	if lay.ffn, err = f(); err != nil {
		return fmt.Errorf("layer %d ffn: %w", l, err)
	}
	return nil
}
