package k3

import (
	"strconv"

	"github.com/k3-project/k3/moe"
)

// ExpertLoadError is the error a forward pass returns when a routed expert cannot be obtained
// (SPEC §4.8); callers test for it with errors.As (the example CLI maps it to exit code 4).
type ExpertLoadError = moe.ExpertLoadError

// ffn is a layer's feed-forward block: the dense SiTU-GLU MLP or the LatentMoE, run with the
// session's scratch memory.
type ffn interface {
	ForwardWith(dst, x []float32, T int, ws *moe.Workspace) error
}

// latentMoE adapts moe.MoE to ffn (the engine does not ask for the routing picks).
type latentMoE struct{ *moe.MoE }

func (f latentMoE) ForwardWith(dst, x []float32, T int, ws *moe.Workspace) error {
	return f.ForwardRoutedWith(dst, x, T, nil, ws)
}

// bindFFN binds layer l's FFN tensors and returns the constructor to run once every tensor of the
// model was found and shape-checked.
func (m *Model) bindFFN(b *binder, l int) func() (ffn, error) {
	c := &m.cfg
	E := c.Hidden
	lp := layerPrefix(l)
	beta1, beta2 := float32(c.SiTUBeta), float32(c.SiTULinearBeta)
	if c.IsDense(l) {
		p := lp + "mlp."
		gate := b.matrix(p+"gate_proj.weight", c.DenseInter, E, classTrunk)
		up := b.matrix(p+"up_proj.weight", c.DenseInter, E, classTrunk)
		down := b.matrix(p+"down_proj.weight", E, c.DenseInter, classTrunk)
		return func() (ffn, error) { return moe.NewDense(gate, up, down, beta1, beta2, m.threads) }
	}
	p := lp + "block_sparse_moe."
	SI := c.NumShared * c.MoEInter
	w := moe.Weights{
		Gate: b.matrix(p+"gate.weight", c.NumExperts, E, classTrunk),
		Bias: b.vector(p+"gate.e_score_correction_bias", c.NumExperts, classTrunk),
		Down: b.matrix(p+"routed_expert_down_proj.weight", c.Latent, E, classTrunk),
		Up:   b.matrix(p+"routed_expert_up_proj.weight", E, c.Latent, classTrunk),
	}
	if c.LatentNorm {
		w.Norm = b.vector(p+"routed_expert_norm.weight", c.Latent, classTrunk)
	}
	if SI > 0 {
		w.SharedGate = b.matrix(p+"shared_experts.gate_proj.weight", SI, E, classTrunk)
		w.SharedUp = b.matrix(p+"shared_experts.up_proj.weight", SI, E, classTrunk)
		w.SharedDown = b.matrix(p+"shared_experts.down_proj.weight", E, SI, classTrunk)
	}
	experts := make([]moe.Expert, c.NumExperts)
	for e := range experts {
		ep := p + "experts." + strconv.Itoa(e) + "."
		experts[e] = moe.Expert{
			W1: b.mxfp4(ep+"w1", c.MoEInter, c.Latent),
			W2: b.mxfp4(ep+"w2", c.Latent, c.MoEInter),
			W3: b.mxfp4(ep+"w3", c.MoEInter, c.Latent),
		}
	}
	cfg := moe.Config{
		Layer: l, Hidden: E, Latent: c.Latent, Inter: c.MoEInter, TopK: c.TopK,
		RoutedScale: float32(c.RoutedScale), Renorm: c.MoERenorm, LatentNorm: c.LatentNorm,
		Beta1: beta1, Beta2: beta2, RMSEps: m.eps, Workers: m.threads,
	}
	return func() (ffn, error) {
		// Experts are resident (mmap views) for now; the routed-expert cache of SPEC §9 will
		// replace this source without touching the layer.
		mo, err := moe.New(cfg, w, moe.NewMemExperts(map[int][]moe.Expert{l: experts}))
		if err != nil {
			return nil, err
		}
		return latentMoE{mo}, nil
	}
}
