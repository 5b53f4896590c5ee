package k3

import (
	"sync"

	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/trunk"
)

// ffn is a layer's feed-forward block: the dense SiTU-GLU MLP or the LatentMoE, run with the
// session's scratch memory.
type ffn interface {
	ForwardWith(dst, x []float32, T int, ws *moe.Workspace) error
}

// latentMoE adapts moe.MoE to ffn (the engine does not ask for the routing picks). With a
// lookahead it first predicts the next MoE layer's experts from this layer's input and asks the
// expert store to read them in the background (router lookahead, SPEC §9.4's speculation made
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
