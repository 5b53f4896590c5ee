package moe

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/quant"
)

// Config is the shape of one Stable LatentMoE layer. Float parameters are
// the config values rounded to float32 (§5.1).
type Config struct {
	Layer       int     // zero-based layer index, passed to the ExpertSource
	Hidden      int     // E
	Latent      int     // ℓ
	Inter       int     // I, routed-expert intermediate width
	TopK        int     // k
	RoutedScale float32 // applied to the routing weights (also when 1.0)
	Renorm      bool    // MoERenorm: renormalise the top-k weights (also for k = 1)
	LatentNorm  bool    // RMSNorm on the routed aggregate
	Beta1       float32 // SiTU β1 (situ_beta)
	Beta2       float32 // SiTU β2 (situ_linear_beta)
	RMSEps      float32
	// Workers bounds the goroutines of the row-parallel mat-muls; ≤ 1 runs
	// serially. Results never depend on it.
	Workers int
	// Pool, when set, runs the splits of the experts and of the shared
	// expert's activation (the mat-muls split as their matrices do); nil
	// starts goroutines per call.
	Pool Runner
}

// Weights are the trunk tensors of one MoE layer (`block_sparse_moe.` names
// of §3.3); routed experts come from an ExpertSource.
type Weights struct {
	Gate       quant.Matrix // gate.weight [NE, E]
	Bias       []float32    // gate.e_score_correction_bias [NE]
	Down       quant.Matrix // routed_expert_down_proj [ℓ, E]
	Up         quant.Matrix // routed_expert_up_proj [E, ℓ]
	Norm       []float32    // routed_expert_norm [ℓ]; required iff LatentNorm
	SharedGate quant.Matrix // shared_experts.gate_proj [SI, E]; nil when there is no shared expert
	SharedUp   quant.Matrix // shared_experts.up_proj [SI, E]
	SharedDown quant.Matrix // shared_experts.down_proj [E, SI]
}

// MoE is one bound Stable LatentMoE layer (§4.8). It is immutable and
// safe for concurrent use.
type MoE struct {
	cfg    Config
	router *Router
	down   quant.Matrix
	up     quant.Matrix
	norm   nn.Vec // w.Norm as narrow as its values allow (nn.Narrowest)
	shared *Dense // nil without shared experts
	src    ExpertSource
	limit  BatchLimiter // src, when it limits the experts per call
	// overlap: src reads a half-wave while the previous one is leased.
	overlap bool
	pool    sync.Pool // *Workspace for calls that bring none
	// minWork is parallel.MinWork: the fewest operations worth a goroutine
	// when experts are split. In-package tests set 1 to force the split on
	// small layers, which must not change a bit.
	minWork int
}

// New validates and binds a MoE layer; src supplies its routed experts.
func New(cfg Config, w Weights, src ExpertSource) (*MoE, error) {
	cfg.Pool = parallel.RunnerOr(cfg.Pool)
	e, l := cfg.Hidden, cfg.Latent
	if e <= 0 || l <= 0 || cfg.Inter <= 0 {
		return nil, fmt.Errorf("moe: layer %d: invalid shape hidden=%d latent=%d inter=%d", cfg.Layer, e, l, cfg.Inter)
	}
	if src == nil {
		return nil, fmt.Errorf("moe: layer %d: no expert source", cfg.Layer)
	}
	if !(cfg.RMSEps > 0) || !(cfg.Beta1 > 0) || !(cfg.Beta2 > 0) {
		return nil, fmt.Errorf("moe: layer %d: rms eps %v and SiTU betas %v, %v must be > 0", cfg.Layer, cfg.RMSEps, cfg.Beta1, cfg.Beta2)
	}
	if w.Gate == nil || w.Gate.Cols() != e {
		return nil, fmt.Errorf("moe: layer %d: router gate missing or not [NE, %d]", cfg.Layer, e)
	}
	if w.Down == nil || w.Down.Rows() != l || w.Down.Cols() != e {
		return nil, fmt.Errorf("moe: layer %d: routed_expert_down_proj missing or not [%d, %d]", cfg.Layer, l, e)
	}
	if w.Up == nil || w.Up.Rows() != e || w.Up.Cols() != l {
		return nil, fmt.Errorf("moe: layer %d: routed_expert_up_proj missing or not [%d, %d]", cfg.Layer, e, l)
	}
	if cfg.LatentNorm && len(w.Norm) != l {
		return nil, fmt.Errorf("moe: layer %d: routed_expert_norm has %d entries, want %d", cfg.Layer, len(w.Norm), l)
	}
	r, err := NewRouter(w.Gate, w.Bias, cfg.TopK, cfg.Renorm, cfg.RoutedScale)
	if err != nil {
		return nil, fmt.Errorf("moe: layer %d: %w", cfg.Layer, err)
	}
	m := &MoE{cfg: cfg, minWork: parallel.MinWork, router: r, down: w.Down, up: w.Up, src: src}
	m.limit, _ = src.(BatchLimiter)
	if o, ok := src.(WaveOverlapper); ok && m.limit != nil {
		m.overlap = o.OverlapWaves()
	}
	if cfg.LatentNorm {
		m.norm = nn.Narrowest(w.Norm)
	}
	if w.SharedGate != nil || w.SharedUp != nil || w.SharedDown != nil {
		if m.shared, err = NewDensePool(w.SharedGate, w.SharedUp, w.SharedDown, cfg.Beta1, cfg.Beta2, cfg.Workers, cfg.Pool); err != nil {
			return nil, fmt.Errorf("moe: layer %d: shared expert: %w", cfg.Layer, err)
		}
		if m.shared.Width() != e {
			return nil, fmt.Errorf("moe: layer %d: shared expert width %d, want %d", cfg.Layer, m.shared.Width(), e)
		}
	}
	return m, nil
}

// Config returns the layer's configuration.
func (m *MoE) Config() Config { return m.cfg }

// Router returns the layer's router.
func (m *MoE) Router() *Router { return m.router }

// Forward computes T positions: x ([T][E], the post-attention-normed input)
// and dst ([T][E]) must not alias.
func (m *MoE) Forward(dst, x []float32, T int) error {
	return m.ForwardRouted(dst, x, T, nil)
}

// ForwardRouted is Forward that also reports the picks: if ids is non-nil
// (len T·k), ids[t·k+j] receives position t's j-th expert in pick order
// (for expert traces and cache statistics).
//
// Evaluation (§5.3): route on the full-width x; z = W_down x; every
// picked expert's y = W2·SiTU-GLU(W1 z, W3 z) (one mat-mul per expert over
// the positions that picked it, bit-identical to per-position mat-vecs);
// per position u = u ⊕ (w_j ⊗ y_j) from +0 in pick order; u ← RMSNorm(u) if
// LatentNorm; routed = W_up u; shared = W_sd·SiTU-GLU(W_sg x, W_su x) on the
// original x, unweighted; out = routed ⊕ shared.
func (m *MoE) ForwardRouted(dst, x []float32, T int, ids []int) error {
	ws, _ := m.pool.Get().(*Workspace)
	if ws == nil {
		ws = new(Workspace)
	}
	err := m.ForwardRoutedWith(dst, x, T, ids, ws)
	m.pool.Put(ws)
	return err
}

// ForwardRoutedWith is ForwardRouted using the caller's scratch memory: with
// a reused ws a decode step makes no heap allocation of its own on one
// worker (the ExpertSource may allocate). ws must not be used concurrently
// by another call; nil borrows one from the layer's pool. Results are
// bit-identical to ForwardRouted.
//
// With Workers > 1 the distinct experts of the call are spread over the
// workers, each expert running whole on one goroutine, when each chunk of
// experts holds at least parallel.MinWork multiply-adds; with fewer distinct
// experts than workers each expert's mat-muls are split by rows instead.
// Either way every expert output is computed by the same kernels and the
// outputs are summed afterwards in pick order.
func (m *MoE) ForwardRoutedWith(dst, x []float32, T int, ids []int, ws *Workspace) error {
	if ws == nil {
		return m.ForwardRouted(dst, x, T, ids)
	}
	c := m.cfg
	e, l, k, ni := c.Hidden, c.Latent, c.TopK, c.Inter
	if T < 1 || len(x) != T*e || len(dst) != T*e {
		return fmt.Errorf("moe: layer %d: len(x)=%d len(dst)=%d, want T·E = %d·%d", c.Layer, len(x), len(dst), T, e)
	}
	if ids != nil && len(ids) != T*k {
		return fmt.Errorf("moe: layer %d: len(ids)=%d, want T·k = %d", c.Layer, len(ids), T*k)
	}
	ne := m.router.Experts()
	uniqMax := min(T*k, ne)
	// An expert costs about 3·ni·ℓ multiply-adds per position that picked
	// it, T·k/uniqMax positions at least on average: split the experts only
	// into chunks worth a goroutine (the small fixture models run inline).
	grain := parallel.GrainFor(3*ni*l*max(1, T*k/uniqMax), m.minWork)
	wk := c.Pool.Limit(c.Workers)
	chunks := parallel.Chunks(uniqMax, wk, grain)
	si := 0
	if m.shared != nil {
		si = m.shared.Inter()
	}
	ws.f32.Reset(T*k + T*ne + 2*ne + T*l + T*k*l + chunks*(2*T*l+2*T*ni) + T*l + T*e + 2*T*si)
	ws.ints.Reset(2*T*k + ne + 3*uniqMax + 1)
	if ids == nil {
		ids = ws.ints.Take(T * k)
	}
	wts := ws.f32.Take(T * k)
	if err := m.router.route(ids, wts, x, T, c.Workers, ws.f32.Take(T*ne), ws.f32.Take(2*ne)); err != nil {
		return fmt.Errorf("moe: layer %d: %w", c.Layer, err)
	}
	z := ws.f32.Take(T * l)
	quant.MatMulParallel(m.down, z, l, x, T, c.Workers)

	// Union of the picks in order of first appearance; the slots (t·k + j)
	// of unique expert n are slots[start[n]:start[n+1]], ascending.
	where := ws.ints.Take(ne) // expert id → index in uniq, or −1
	for i := range where {
		where[i] = -1
	}
	uniq := ws.ints.Take(uniqMax)[:0]
	for _, id := range ids {
		if where[id] < 0 {
			where[id] = len(uniq)
			uniq = append(uniq, id)
		}
	}
	nu := len(uniq)
	start := ws.ints.Take(uniqMax + 1)[:nu+1]
	fill := ws.ints.Take(uniqMax)[:nu]
	clear(start)
	for _, id := range ids {
		start[where[id]+1]++
	}
	for n := range nu {
		start[n+1] += start[n]
	}
	copy(fill, start[:nu])
	slots := ws.ints.Take(T * k)
	for s, id := range ids {
		n := where[id]
		slots[fill[n]] = s
		fill[n]++
	}

	y := ws.f32.Take(T * k * l) // y[slot] = E_{ids[slot]}(z_t)
	// A source that can lease only so many experts at once (a small cache)
	// gets the union in waves; every y[slot] is computed by the same
	// kernels either way and summed below in pick order, so waves change no
	// bit. A source that overlaps waves gets half-waves, each read while
	// the previous one runs.
	wave, overlap := nu, false
	if m.limit != nil {
		switch mb := m.limit.MaxBatch(); {
		case m.overlap && mb >= 2 && mb/2 < nu:
			wave, overlap = mb/2, true
		case mb > 0 && mb < nu:
			wave = mb
		}
	}
	chunks = parallel.Chunks(wave, wk, grain)
	if cap(ws.parts) < chunks {
		ws.parts = make([]expertPart, chunks)
	}
	for i := range ws.parts[:chunks] {
		ws.parts[i] = expertPart{zin: ws.f32.Take(T * l), yout: ws.f32.Take(T * l),
			g: ws.f32.Take(T * ni), u: ws.f32.Take(T * ni)}
	}
	if overlap {
		if err := m.runWavesOverlapped(ws, wave, uniq, start, slots, z, y, grain); err != nil {
			return err
		}
	} else {
		for w0 := 0; w0 < nu; w0 += wave {
			w1 := min(nu, w0+wave)
			experts, release, err := m.fetchWave(uniq[w0:w1], ws.experts[:0])
			if err != nil {
				return err
			}
			ws.experts = experts[:0] // keep the capacity for the next call
			m.runWave(ws, experts, release, start[w0:w1+1], slots, z, y, grain)
		}
	}

	u := ws.f32.Take(T * l) // the aggregate [T][ℓ]
	// Positions are independent: split them over the pool (about 2·k·ℓ
	// operations each, the norm's included).
	ws.comb = combineSplit{m: m, u: u, y: y, wts: wts}
	c.Pool.Run(T, c.Workers, parallel.GrainFor(2*k*l, m.minWork), &ws.comb)
	ws.comb = combineSplit{} // hold no references to the caller's data
	quant.MatMulParallel(m.up, dst, e, u, T, c.Workers)
	if m.shared != nil {
		sh := ws.f32.Take(T * e)
		d := m.shared
		gatedMLP(sh, x, T, d.gate, d.up, d.down, c.Beta1, c.Beta2, c.Workers, c.Pool, &ws.glu, ws.f32.Take(T*si), ws.f32.Take(T*si))
		nn.Add(dst, dst, sh)
	}
	return nil
}

// combineSplit sums a call's expert outputs per position in pick order,
// u_t = Σ_j w_{t,j} ⊗ y_{t,j} from +0, and applies the latent norm, for the
// positions [lo, hi): a parallel.Task.
type combineSplit struct {
	m         *MoE
	u, y, wts []float32
}

func (t *combineSplit) Run(lo, hi int) {
	c := t.m.cfg
	l, k := c.Latent, c.TopK
	for p := lo; p < hi; p++ {
		ut := t.u[p*l : (p+1)*l]
		clear(ut)
		for j := range k {
			s := p*k + j
			wj := t.wts[s]
			for i, v := range t.y[s*l : (s+1)*l] {
				ut[i] = ut[i] + float32(wj*v)
			}
		}
		if t.m.norm.Len() > 0 {
			t.m.norm.RMSNorm(ut, ut, c.RMSEps)
		}
	}
}

// fetchWave leases the experts uniq (one wave of the call's union) into
// dst[:0] and checks their shapes; on error nothing stays leased.
func (m *MoE) fetchWave(uniq []int, dst []Expert) ([]Expert, func(), error) {
	c := m.cfg
	experts, release, err := m.src.Experts(c.Layer, uniq, dst)
	if err != nil {
		// The source names the expert (the expert cache's error type does); the forward pass
		// fails instead of skipping it (§4.8).
		return nil, nil, fmt.Errorf("moe: layer %d: routed experts: %w", c.Layer, err)
	}
	if release == nil {
		release = noRelease
	}
	if len(experts) != len(uniq) {
		release()
		return nil, nil, fmt.Errorf("moe: layer %d: the expert source returned %d experts for %d ids", c.Layer, len(experts), len(uniq))
	}
	for n, ex := range experts {
		if err := m.checkExpert(ex); err != nil {
			release()
			return nil, nil, fmt.Errorf("moe: layer %d: expert %d: %w", c.Layer, uniq[n], err)
		}
	}
	return experts, release, nil
}

// runWavesOverlapped runs the union uniq in waves of wave experts, leasing
// wave i+1 on another goroutine while wave i runs (§9.2): the source's
// reads then overlap the compute instead of following it. The waves run in
// the same order over the same slots as without overlap, so no bit changes.
func (m *MoE) runWavesOverlapped(ws *Workspace, wave int, uniq, start, slots []int, z, y []float32, grain int) error {
	nu := len(uniq)
	bufs := &ws.waveBufs
	experts, release, err := m.fetchWave(uniq[:min(nu, wave)], bufs[0][:0])
	for w0, i := 0, 0; ; i ^= 1 {
		if err != nil {
			return err
		}
		bufs[i] = experts[:0] // keep the capacity for the next call
		w1 := min(nu, w0+wave)
		next := &ws.next
		if w1 < nu {
			next.wg.Add(1)
			go func(ids []int, dst []Expert) {
				defer next.wg.Done()
				next.experts, next.release, next.err = m.fetchWave(ids, dst)
			}(uniq[w1:min(nu, w1+wave)], bufs[i^1][:0])
			// Yield so that the read-ahead issues its reads now: the wave's
			// compute keeps every P busy for less than a preemption slice,
			// so otherwise the reads would start only once it had ended
			// (measured: no overlap at all without this).
			runtime.Gosched()
		}
		m.runWave(ws, experts, release, start[w0:w1+1], slots, z, y, grain)
		if w1 == nu {
			return nil
		}
		next.wg.Wait()
		experts, release, err = next.experts, next.release, next.err
		next.experts, next.release, next.err = nil, nil, nil
		w0 = w1
	}
}

// runWave runs the leased experts of one wave, each over the positions that
// picked it (start indexes slots, relative to the wave), and releases them.
func (m *MoE) runWave(ws *Workspace, experts []Expert, release func(), start, slots []int, z, y []float32, grain int) {
	c := m.cfg
	nu := len(experts)
	r := &ws.run
	*r = expertRun{m: m, experts: experts, start: start, slots: slots, z: z, y: y}
	wk := c.Pool.Limit(c.Workers)
	chunks := parallel.Chunks(nu, wk, grain)
	r.parts = ws.parts[:chunks]
	if chunks > 1 {
		if cap(ws.order) < nu {
			ws.order = make([]int, nu)
		}
		r.order = largestFirst(ws.order[:nu], start)
		c.Pool.Run(nu, wk, grain, (*expertSplit)(r))
	} else {
		r.run(0, nu, c.Workers)
	}
	*r = expertRun{} // drop references to the caller's data
	release()
}

func noRelease() {}

// expertRun is the state of one call's expert phase, shared by the workers.
type expertRun struct {
	m       *MoE
	experts []Expert
	start   []int // unique expert n uses slots[start[n]:start[n+1]]
	slots   []int
	z, y    []float32
	parts   []expertPart // per worker chunk
	// order is the split's claiming order (largestFirst) and next the
	// number of its experts claimed so far.
	order []int
	next  int64
}

// expertSplit is the expert split of a wave as a parallel.Task. The
// experts' work differs by the positions that picked them (in a prefill,
// a few to a few dozen), so a fixed half of them per chunk left one worker
// waiting for the other at every layer: each chunk instead
// claims the next expert in order (largest first) until none are left, and
// runs its mat-muls on one goroutine with the chunk's scratch. Which
// goroutine runs an expert changes no bit: each expert's chain is computed
// whole, into its own slots.
type expertSplit expertRun

func (t *expertSplit) Run(lo, _ int) {
	r := (*expertRun)(t)
	p := r.part(lo)
	for {
		i := int(atomic.AddInt64(&r.next, 1)) - 1
		if i >= len(r.order) {
			return
		}
		r.one(r.order[i], p, 1)
	}
}

// largestFirst fills order with 0..len(order)−1 sorted by descending number
// of positions (start[n+1] − start[n]), ties by index, and returns it: the
// longest-processing-first order that keeps the workers' last experts
// small.
func largestFirst(order, start []int) []int {
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return (start[b+1] - start[b]) - (start[a+1] - start[a])
	})
	return order
}

// expertPart is one worker's scratch.
type expertPart struct {
	zin, yout, g, u []float32
	glu             gluSplit
}

// run runs unique experts [lo, hi), each as one mat-mul chain over the
// positions that picked it, on workers goroutines per mat-mul.
func (r *expertRun) run(lo, hi, workers int) {
	p := r.part(lo)
	for n := lo; n < hi; n++ {
		r.one(n, p, workers)
	}
}

// part returns the scratch of the chunk that starts at expert lo.
func (r *expertRun) part(lo int) *expertPart {
	for i := range r.parts {
		if b, _ := parallel.Bounds(len(r.start)-1, len(r.parts), i); b == lo {
			return &r.parts[i]
		}
	}
	return &r.parts[0]
}

// one runs unique expert n over the positions that picked it, with p's
// scratch, on workers goroutines per mat-mul.
func (r *expertRun) one(n int, p *expertPart, workers int) {
	c := r.m.cfg
	l, k := c.Latent, c.TopK
	ex := r.experts[n]
	sl := r.slots[r.start[n]:r.start[n+1]]
	for i, s := range sl {
		t := s / k
		copy(p.zin[i*l:(i+1)*l], r.z[t*l:(t+1)*l])
	}
	cnt := len(sl)
	gatedMLP(p.yout[:cnt*l], p.zin[:cnt*l], cnt, ex.W1, ex.W3, ex.W2, c.Beta1, c.Beta2, workers, c.Pool, &p.glu, p.g, p.u)
	for i, s := range sl {
		copy(r.y[s*l:(s+1)*l], p.yout[i*l:(i+1)*l])
	}
}

func (m *MoE) checkExpert(ex Expert) error {
	l, i := m.cfg.Latent, m.cfg.Inter
	for _, w := range []struct {
		name       string
		m          quant.Matrix
		rows, cols int
	}{{"w1", ex.W1, i, l}, {"w3", ex.W3, i, l}, {"w2", ex.W2, l, i}} {
		if w.m == nil {
			return fmt.Errorf("%s is missing", w.name)
		}
		if w.m.Rows() != w.rows || w.m.Cols() != w.cols {
			return fmt.Errorf("%s is [%d, %d], want [%d, %d]", w.name, w.m.Rows(), w.m.Cols(), w.rows, w.cols)
		}
	}
	return nil
}
