package k3

import (
	"strconv"
	"sync"

	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/trunk"
)

// ExpertLoadError is the error a forward pass returns when a routed expert cannot be obtained
// (SPEC §4.8); callers test for it with errors.As (the example CLI maps it to exit code 4).
type ExpertLoadError = moe.ExpertLoadError

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
		return func() (ffn, error) { return moe.NewDensePool(gate, up, down, beta1, beta2, m.threads, m.pool) }
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
	var src moe.ExpertSource
	if b.cachedExperts {
		// The expert store locates and checks every expert itself (cache.New, after the describe
		// pass); nothing is mapped here.
		src = m.experts
		b.countExperts(c)
	} else {
		experts := make([]moe.Expert, c.NumExperts)
		for e := range experts {
			ep := p + "experts." + strconv.Itoa(e) + "."
			experts[e] = moe.Expert{
				W1: b.mxfp4(ep+"w1", c.MoEInter, c.Latent),
				W2: b.mxfp4(ep+"w2", c.Latent, c.MoEInter),
				W3: b.mxfp4(ep+"w3", c.MoEInter, c.Latent),
			}
		}
		var mem moe.ExpertSource = moe.NewMemExperts(map[int][]moe.Expert{l: experts})
		if m.tracer != nil {
			mem = tracedExperts{mem, m.tracer}
		}
		src = mem
	}
	cfg := moe.Config{
		Layer: l, Hidden: E, Latent: c.Latent, Inter: c.MoEInter, TopK: c.TopK,
		RoutedScale: float32(c.RoutedScale), Renorm: c.MoERenorm, LatentNorm: c.LatentNorm,
		Beta1: beta1, Beta2: beta2, RMSEps: m.eps, Workers: m.threads, Pool: m.pool,
	}
	return func() (ffn, error) {
		mo, err := moe.New(cfg, w, src)
		if err != nil {
			return nil, err
		}
		return latentMoE{MoE: mo}, nil
	}
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
