package attention

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/quant"
)

// MLAConfig is the shape of one gated-MLA layer (§4.6).
type MLAConfig struct {
	Hidden  int  // E
	Heads   int  // Hm
	QLoRA   int  // Rq
	KVLoRA  int  // Rkv
	NoPE    int  // dn
	Rope    int  // dr (the "rope" slots: cached and scored, never rotated)
	VHead   int  // dv
	OutGate bool // a ⊙ σ(W_g x) before o_proj
	RMSEps  float32
	// Workers bounds the goroutines used for mat-mul rows and heads; ≤ 1 runs
	// serially. Results never depend on it.
	Workers int
	// Pool, when set, runs the split of the heads (the mat-muls split as
	// their matrices do); nil starts goroutines per call.
	Pool Runner
}

// MLAWeights are the tensors of one MLA layer (`self_attn.` names of
// §3.3). Matrices are [out, in].
type MLAWeights struct {
	QA      quant.Matrix // q_a_proj [Rq, E]
	QANorm  []float32    // q_a_layernorm [Rq]
	QB      quant.Matrix // q_b_proj [Hm·(dn+dr), Rq]
	KVA     quant.Matrix // kv_a_proj_with_mqa [Rkv+dr, E]
	KVANorm []float32    // kv_a_layernorm [Rkv]
	KVB     quant.Matrix // kv_b_proj [Hm·(dn+dv), Rkv]
	O       quant.Matrix // o_proj [E, Hm·dv]
	G       quant.Matrix // g_proj [Hm·dv, E]; required iff OutGate
}

// MLA is one bound gated-MLA layer using the absorbed formulation over a
// latent cache. It is immutable and safe for concurrent use by sequences
// with distinct caches.
type MLA struct {
	cfg   MLAConfig
	w     MLAWeights
	uk    rowSource      // key half of kv_b, row h·dn + j = W_uk,h[j] ∈ R^Rkv
	uv    []quant.Matrix // per head, kv_b rows h·(dn+dv)+dn .. (h+1)·(dn+dv)
	scale float32        // f32(1/sqrt(f64(dn+dr)))
	// qaNorm and kvaNorm are w.QANorm and w.KVANorm held as narrow as their values allow
	// (nn.Narrowest: two bytes an element for gains widened from bf16 or f16), widened exactly
	// where they are used; w keeps neither slice.
	qaNorm, kvaNorm nn.Vec
	pool            sync.Pool // *Workspace for calls that bring none
	// minWork is parallel.MinWork: the fewest operations worth a goroutine
	// when heads are split. In-package tests set 1 to force the split on
	// small layers, which must not change a bit.
	minWork int
}

// NewMLA validates the weights against cfg and binds them.
func NewMLA(cfg MLAConfig, w MLAWeights) (*MLA, error) {
	cfg.Pool = parallel.RunnerOr(cfg.Pool)
	e, hm, rq, rkv, dn, dr, dv := cfg.Hidden, cfg.Heads, cfg.QLoRA, cfg.KVLoRA, cfg.NoPE, cfg.Rope, cfg.VHead
	if e <= 0 || hm <= 0 || rq <= 0 || rkv <= 0 || dn <= 0 || dr < 0 || dv <= 0 {
		return nil, fmt.Errorf("attention: mla: invalid shape hidden=%d heads=%d q_lora=%d kv_lora=%d nope=%d rope=%d v=%d",
			e, hm, rq, rkv, dn, dr, dv)
	}
	if !(cfg.RMSEps > 0) {
		return nil, fmt.Errorf("attention: mla: rms eps %v must be > 0", cfg.RMSEps)
	}
	dq := dn + dr
	mats := []struct {
		name       string
		m          quant.Matrix
		rows, cols int
	}{
		{"q_a_proj", w.QA, rq, e}, {"q_b_proj", w.QB, hm * dq, rq},
		{"kv_a_proj_with_mqa", w.KVA, rkv + dr, e}, {"kv_b_proj", w.KVB, hm * (dn + dv), rkv},
		{"o_proj", w.O, e, hm * dv},
	}
	if cfg.OutGate {
		mats = append(mats, struct {
			name       string
			m          quant.Matrix
			rows, cols int
		}{"g_proj", w.G, hm * dv, e})
	}
	for _, m := range mats {
		if err := checkMatrix("mla", m.name, m.m, m.rows, m.cols); err != nil {
			return nil, err
		}
	}
	if len(w.QANorm) != rq || len(w.KVANorm) != rkv {
		return nil, fmt.Errorf("attention: mla: q_a_layernorm has %d entries (want %d), kv_a_layernorm %d (want %d)",
			len(w.QANorm), rq, len(w.KVANorm), rkv)
	}
	m := &MLA{cfg: cfg, w: w, minWork: parallel.MinWork, scale: float32(1 / math.Sqrt(float64(dq))),
		qaNorm: nn.Narrowest(w.QANorm), kvaNorm: nn.Narrowest(w.KVANorm)}
	m.w.QANorm, m.w.KVANorm = nil, nil
	if !cfg.OutGate {
		m.w.G = nil
	}
	m.uv = make([]quant.Matrix, hm)
	for h := range hm {
		m.uv[h] = w.KVB.Slice(h*(dn+dv)+dn, (h+1)*(dn+dv))
	}
	m.uk = newKeyRows(w.KVB, hm, dn, dv)
	return m, nil
}

// Config returns the layer's configuration.
func (m *MLA) Config() MLAConfig { return m.cfg }

// MLACache is the per-sequence cache of one MLA layer in latent form (
// §4.6): per position one row [KVLoRA+Rope] holding the RMS-normalised
// latent followed by the raw shared rope key — 42.8× smaller than the
// expanded per-head keys and values. Keeping both in one row lets a score be
// a single R16 dot product against the concatenated absorbed query.
type MLACache struct {
	KVLoRA, Rope int
	KV           []float32 // [N][KVLoRA+Rope]
}

// NewCache returns an empty cache for this layer.
func (m *MLA) NewCache() *MLACache {
	return &MLACache{KVLoRA: m.cfg.KVLoRA, Rope: m.cfg.Rope}
}

func (c *MLACache) width() int { return c.KVLoRA + c.Rope }

// Len returns the number of cached positions.
func (c *MLACache) Len() int {
	if c.width() <= 0 {
		return 0
	}
	return len(c.KV) / c.width()
}

// Latent returns the normalised latent of cached position s (shared; do not
// modify).
func (c *MLACache) Latent(s int) []float32 {
	w := c.width()
	return c.KV[s*w : s*w+c.KVLoRA : s*w+c.KVLoRA]
}

// KRope returns the rope key of cached position s (shared; do not modify).
func (c *MLACache) KRope(s int) []float32 {
	w := c.width()
	return c.KV[s*w+c.KVLoRA : (s+1)*w : (s+1)*w]
}

// Clone returns a deep copy (a snapshot).
func (c *MLACache) Clone() *MLACache {
	d := *c
	d.KV = append([]float32(nil), c.KV...)
	return &d
}

// CopyFrom overwrites c with o (restoring a snapshot), reusing c's
// capacity.
func (c *MLACache) CopyFrom(o *MLACache) error {
	if c.KVLoRA != o.KVLoRA || c.Rope != o.Rope {
		return fmt.Errorf("attention: mla cache: shape kv_lora=%d rope=%d, source kv_lora=%d rope=%d",
			c.KVLoRA, c.Rope, o.KVLoRA, o.Rope)
	}
	c.KV = append(c.KV[:0], o.KV...)
	return nil
}

// Reset empties the cache, keeping its capacity.
func (c *MLACache) Reset() { c.KV = c.KV[:0] }

// Truncate drops every position from n on (rolling back speculative steps).
func (c *MLACache) Truncate(n int) error {
	if n < 0 || n > c.Len() {
		return fmt.Errorf("attention: mla cache: truncate to %d of %d positions", n, c.Len())
	}
	c.KV = c.KV[:n*c.width()]
	return nil
}

// Forward runs T ≥ 1 new positions through the layer, appending them to c
// (positions p0..p0+T−1, p0 = c.Len()). x holds the RMS-normalised layer
// inputs ([T][E]); dst receives the outputs ([T][E]); they must not alias.
// Any split of a sequence into Forward calls gives bit-identical outputs.
//
// Every mode uses the absorbed formulation, evaluated as follows:
//
//	c_q = RMSNorm(W_qa x); q = W_qb c_q                     R16/RG mat-muls
//	c = W_kva x; lat = RMSNorm(c[:Rkv]); k_rope = c[Rkv:]   cached
//	q'_h[r] = f32(RS_j f64(q_nope_h[j])·f64(W_uk,h[j][r]))  j ascending
//	score(s) = R16([q'_h ‖ q_rope_h], [lat_s ‖ k_rope_s]) ⊗ f32(1/sqrt(f64(dn+dr)))
//	p = Softmax(score over s ≤ p0+t)
//	m_h[r] = f32(RS_s f64(p_s)·f64(lat_s[r]))               s ascending
//	a_h = W_uv,h · m_h                                      R16/RG
//	a = a ⊗ σ(W_g x) if OutGate;  out = W_o a
//
// The score is one R16 dot product of length Rkv+dr (internal/kernels/dot, SIMD on
// amd64) rather than the expanded form's sequential sum over dn+dr, which
// would be latency-bound at Rkv+dr terms. The latent mix m is a float64 sum
// (rather than the f32 accumulator the expanded form uses for a) because W_uv
// amplifies its rounding error.
//
// Implementation: a position's scores against the cache are one f32 mat-vec
// over the cache rows (q widened once); the two RS column sums (q' over j,
// m over s) run through the axpy kernels (AVX2 on amd64, four rows per pass,
// each column still summed in row order); heads are split over Workers.
// Forward borrows its scratch from a pool; ForwardWith takes it from the
// caller.
func (m *MLA) Forward(dst, x []float32, T int, c *MLACache) error {
	ws, _ := m.pool.Get().(*Workspace)
	if ws == nil {
		ws = new(Workspace)
	}
	err := m.ForwardWith(dst, x, T, c, ws)
	m.pool.Put(ws)
	return err
}

// ForwardWith is Forward using the caller's scratch memory: with a reused
// ws a decode step (T = 1) makes no heap allocation on one worker (the
// cache grows amortised as positions are appended). ws must not be used
// concurrently by another call; nil borrows one from the layer's pool.
// Results are bit-identical to Forward.
func (m *MLA) ForwardWith(dst, x []float32, T int, c *MLACache, ws *Workspace) error {
	if ws == nil {
		return m.Forward(dst, x, T, c)
	}
	return m.ForwardFrom(dst, x, T, c, ws, 0)
}

// ForwardFrom is ForwardWith computing the outputs of positions [from, T)
// only: every position's latent and rope key still go into the cache (what
// later calls attend to), but the queries, scores, gate and output
// projection of the earlier positions are skipped and their rows of dst
// left as they were. For a last layer whose earlier rows nobody reads; the
// rows it computes are ForwardWith's bit for bit. ws must not be nil.
func (m *MLA) ForwardFrom(dst, x []float32, T int, c *MLACache, ws *Workspace, from int) error {
	cfg := m.cfg
	if T < 1 || len(x) != T*cfg.Hidden || len(dst) != T*cfg.Hidden {
		return fmt.Errorf("attention: mla: len(x)=%d len(dst)=%d, want T·E = %d·%d", len(x), len(dst), T, cfg.Hidden)
	}
	if from < 0 || from >= T {
		return fmt.Errorf("attention: mla: outputs from position %d of %d", from, T)
	}
	if err := m.checkCache(c); err != nil {
		return err
	}
	ws.mlaOne[0] = mlaSeg{c: c, n: T}
	err := m.forward(dst, x, T, from, ws.mlaOne[:], ws)
	ws.mlaOne[0] = mlaSeg{}
	return err
}

// ForwardBatch runs the new positions of several sequences through the layer in one call:
// sequence i owns lens[i] ≥ 1 consecutive rows of x and dst (in order), appends them to
// caches[i] and attends to that cache alone, at its own position. The projections run as one
// mat-mul over all rows and each head's absorbed key rows are decoded once for all sequences,
// so every sequence's outputs and cache are bit-identical to its own ForwardWith call (§4.11).
// ws must not be nil.
func (m *MLA) ForwardBatch(dst, x []float32, lens []int, caches []*MLACache, ws *Workspace) error {
	if len(lens) == 0 || len(lens) != len(caches) {
		return fmt.Errorf("attention: mla: batch of %d lengths and %d caches", len(lens), len(caches))
	}
	segs := ws.mlaSegs[:0]
	T := 0
	for i, n := range lens {
		if n < 1 {
			return fmt.Errorf("attention: mla: batch sequence %d has %d positions", i, n)
		}
		if err := m.checkCache(caches[i]); err != nil {
			return fmt.Errorf("attention: mla: batch sequence %d: %w", i, err)
		}
		for _, o := range caches[:i] {
			if o == caches[i] {
				return fmt.Errorf("attention: mla: batch sequence %d shares its cache with an earlier one", i)
			}
		}
		segs = append(segs, mlaSeg{c: caches[i], n: n})
		T += n
	}
	ws.mlaSegs = segs
	e := m.cfg.Hidden
	if len(x) != T*e || len(dst) != T*e {
		return fmt.Errorf("attention: mla: len(x)=%d len(dst)=%d, want T·E = %d·%d", len(x), len(dst), T, e)
	}
	err := m.forward(dst, x, T, 0, segs, ws)
	clear(segs) // hold no references to the caller's caches
	return err
}

func (m *MLA) checkCache(c *MLACache) error {
	rkv, dr := m.cfg.KVLoRA, m.cfg.Rope
	if c == nil || c.KVLoRA != rkv || c.Rope != dr || len(c.KV)%(rkv+dr) != 0 {
		return fmt.Errorf("attention: mla: cache does not match the layer (kv_lora=%d rope=%d)", rkv, dr)
	}
	return nil
}

// mlaSeg is one sequence of a call: its cache, its number of new positions and, while the
// heads run, where its rows are.
type mlaSeg struct {
	c  *MLACache
	n  int
	kv []float32 // the cache rows, the new positions included
	// T queries (the first at position p0) in rows [row, row+T) of the call's q and a.
	T, p0, row int
}

// forward runs T rows, split into the sequences segs, through the layer; outputs are computed
// for rows [from, T), where from > 0 only with one sequence.
func (m *MLA) forward(dst, x []float32, T, from int, segs []mlaSeg, ws *Workspace) error {
	cfg := m.cfg
	e, hm, rq, rkv, dn, dr, dv := cfg.Hidden, cfg.Heads, cfg.QLoRA, cfg.KVLoRA, cfg.NoPE, cfg.Rope, cfg.VHead
	dq := dn + dr
	wk := cfg.Pool.Limit(cfg.Workers)
	kw := rkv + dr
	tq, xq := T-from, x[from*e:] // the positions whose outputs are computed
	// The new positions' latents and rope keys go straight into the caches, each sequence's
	// after its cached rows; then the queries know where they sit.
	row, maxT, maxN, scoreWork := 0, 0, 0, 0
	for i := range segs {
		g := &segs[i]
		c := g.c
		p0 := c.Len()
		c.KV = slices.Grow(c.KV, g.n*kw)
		c.KV = c.KV[:(p0+g.n)*kw]
		g.kv = c.KV
		g.T, g.p0, g.row = g.n-from, p0+from, row // from > 0 only with one sequence
		row += g.T
		maxT, maxN = max(maxT, g.T), max(maxN, p0+g.n)
		scoreWork += g.T * (p0 + g.n) * (kw + rkv)
	}
	// A head costs about dn·Rkv·(1+T) multiply-adds to decode and absorb
	// W_uk, T·n·(kw+Rkv) for the scores and the mix and T·dv·Rkv for W_uv:
	// split the heads only into chunks worth a goroutine.
	grain := parallel.GrainFor(dn*rkv*(1+tq)+scoreWork+tq*dv*rkv, m.minWork)
	chunks := parallel.Chunks(hm, wk, grain)
	perChunk32 := dn*rkv + maxT*kw + maxT*rkv + maxN
	perChunk64 := maxT*rkv + max(3*dn, 3*maxN, 4)
	batched := len(segs) > 1
	kvRows := 0
	if batched {
		kvRows = T * kw
	}
	ws.f32.Reset(tq*rq + tq*hm*dq + 2*tq*hm*dv + chunks*perChunk32 + kvRows)
	ws.f64.Reset(chunks * perChunk64)

	cq := ws.f32.Take(tq * rq)
	quant.MatMulParallel(m.w.QA, cq, rq, xq, tq, wk)
	m.qaNorm.RMSNormRows(cq, cq, cfg.RMSEps)
	q := ws.f32.Take(tq * hm * dq)
	quant.MatMulParallel(m.w.QB, q, hm*dq, cq, tq, wk)

	// One sequence's rows are written in place; several are computed together and copied
	// into their caches.
	kv := segs[0].kv[segs[0].p0*kw-from*kw:]
	if batched {
		kv = ws.f32.Take(kvRows)
	}
	quant.MatMulParallel(m.w.KVA, kv, kw, x, T, wk)
	for t := range T {
		row := kv[t*kw : (t+1)*kw]
		m.kvaNorm.RMSNorm(row[:rkv], row[:rkv], cfg.RMSEps)
	}
	if batched {
		off := 0
		for _, g := range segs {
			copy(g.kv[g.p0*kw:], kv[off*kw:(off+g.n)*kw])
			off += g.n
		}
	}

	a := ws.f32.Take(tq * hm * dv)
	k := &ws.mla
	sc := k.sc
	if cap(sc) < chunks {
		sc = make([]mlaScratch, chunks)
	}
	sc = sc[:chunks]
	for i := range sc {
		s := &sc[i]
		s.wuk, s.qc, s.mix, s.prob = ws.f32.Take(dn*rkv), ws.f32.Take(maxT*kw), ws.f32.Take(maxT*rkv), ws.f32.Take(maxN)
		s.acc, s.coef = ws.f64.Take(maxT*rkv), ws.f64.Take(max(3*dn, 3*maxN, 4))
	}
	// Query t of a sequence sits at position p0+t and attends to the positions before and at
	// it, as in a call over all of the sequence's positions.
	*k = mlaCall{m: m, segs: segs, q: q, a: a, sc: sc}
	cfg.Pool.Run(hm, wk, grain, (*mlaHeads)(k))
	*k = mlaCall{sc: sc} // drop references to the caller's data
	for i := range segs {
		segs[i].kv = nil
	}

	if cfg.OutGate {
		g := ws.f32.Take(tq * hm * dv)
		quant.MatMulParallel(m.w.G, g, hm*dv, xq, tq, wk)
		nn.MulSigmoid(a, a, g)
	}
	quant.MatMulParallel(m.w.O, dst[from*e:], e, a, tq, wk)
	return nil
}

// mlaCall is the state of one call shared by the head workers.
type mlaCall struct {
	m    *MLA
	segs []mlaSeg
	q, a []float32
	sc   []mlaScratch // one per head chunk
}

// mlaScratch is one head worker's scratch.
type mlaScratch struct {
	wuk  []float32   // [dn][Rkv] decoded key-half rows of the current head
	rows [][]float32 // [dn] rows of W_uk,h (in wuk, or in a resident copy)
	qc   []float32   // [T][Rkv+dr] = q'_h ‖ q_rope_h per position
	mix  []float32   // [T][Rkv] latent mix m_h per position
	prob []float32   // [p0+T] scores, then probabilities
	acc  []float64   // [T][Rkv] f64 accumulators of q' and of the mix
	coef []float64   // axpy coefficients
}

// mlaHeads is the head split of a call as a parallel.Task.
type mlaHeads mlaCall

func (t *mlaHeads) Run(lo, hi int) { (*mlaCall)(t).heads(lo, hi) }

// heads runs heads [lo, hi) (see Forward for the evaluation order), each head's key rows
// decoded once for every sequence of the call.
func (k *mlaCall) heads(lo, hi int) {
	cfg := k.m.cfg
	rkv, dn := cfg.KVLoRA, cfg.NoPE
	s := &k.sc[0]
	for i := range k.sc {
		if l, _ := parallel.Bounds(cfg.Heads, len(k.sc), i); l == lo {
			s = &k.sc[i]
		}
	}
	if cap(s.rows) < dn {
		s.rows = make([][]float32, dn)
	}
	rows := s.rows[:dn]
	for h := lo; h < hi; h++ {
		wuk := k.m.uk.head(h, s.wuk[:dn*rkv])
		for j := range rows {
			rows[j] = wuk[j*rkv : (j+1)*rkv : (j+1)*rkv]
		}
		for i := range k.segs {
			k.head(h, s, wuk, rows, &k.segs[i])
		}
	}
}

// head runs head h for the queries of sequence g.
func (k *mlaCall) head(h int, s *mlaScratch, wuk []float32, rows [][]float32, g *mlaSeg) {
	cfg := k.m.cfg
	hm, rkv, dn, dr, dv := cfg.Heads, cfg.KVLoRA, cfg.NoPE, cfg.Rope, cfg.VHead
	dq, kw, T, p0 := dn+dr, rkv+dr, g.T, g.p0
	qs, kv := k.q[g.row*hm*dq:], g.kv
	{
		// q'_h[r] = f32(RS_j f64(q_nope_h[j])·f64(W_uk,h[j][r])), j ascending:
		// three positions at a time over the head's rows where the block
		// kernel applies, the rest one position at a time.
		block := T >= 3 && axpyBlock3Applies(rkv)
		clear(s.acc[:T*rkv])
		t3 := 0
		for ; block && t3+3 <= T; t3 += 3 {
			coef := s.coef[:3*dn]
			for tt := range 3 {
				qt := qs[(t3+tt)*hm*dq+h*dq:]
				for j, v := range qt[:dn] {
					coef[tt*dn+j] = float64(v)
				}
			}
			axpyBlock3(s.acc[t3*rkv:], rkv, coef, dn, wuk, rkv, dn, rkv)
		}
		for t := range T {
			qt := qs[t*hm*dq+h*dq : t*hm*dq+(h+1)*dq]
			acc := s.acc[t*rkv : (t+1)*rkv]
			if t >= t3 {
				coef := s.coef[:dn]
				for j, v := range qt[:dn] {
					coef[j] = float64(v)
				}
				axpyRows(acc, coef, rows)
			}
			qc := s.qc[t*kw : (t+1)*kw]
			for r, v := range acc {
				qc[r] = float32(v)
			}
			copy(qc[rkv:], qt[dn:])
		}
		// m_h[r] = f32(RS_s f64(p_s)·f64(lat_s[r])), s ascending: three
		// positions at a time over the keys all three see, then the one or
		// two later keys of the second and third, where the block kernel
		// applies; the rest one position at a time.
		n := p0 + T
		clear(s.acc[:T*rkv])
		t3 = 0
		for ; block && t3+3 <= T; t3 += 3 {
			for tt := range 3 {
				sc := k.probs(s, g, t3+tt)
				coef := s.coef[tt*n : tt*n+len(sc)]
				for j, v := range sc {
					coef[j] = float64(v)
				}
			}
			ns := p0 + t3 + 1
			axpyBlock3(s.acc[t3*rkv:], rkv, s.coef, n, kv, kw, ns, rkv)
			for tt := 1; tt < 3; tt++ {
				acc := s.acc[(t3+tt)*rkv : (t3+tt+1)*rkv]
				for j := ns; j < ns+tt; j++ {
					axpy1(acc, s.coef[tt*n+j], kv[j*kw:j*kw+rkv])
				}
			}
		}
		for t := t3; t < T; t++ {
			sc := k.probs(s, g, t)
			ns := len(sc)
			acc := s.acc[t*rkv : (t+1)*rkv]
			coef := s.coef[:4]
			j := 0
			for ; j+4 <= ns; j += 4 {
				coef[0], coef[1], coef[2], coef[3] = float64(sc[j]), float64(sc[j+1]), float64(sc[j+2]), float64(sc[j+3])
				axpy4(acc, coef, kv[j*kw:j*kw+rkv], kv[(j+1)*kw:(j+1)*kw+rkv],
					kv[(j+2)*kw:(j+2)*kw+rkv], kv[(j+3)*kw:(j+3)*kw+rkv])
			}
			for ; j < ns; j++ {
				axpy1(acc, float64(sc[j]), kv[j*kw:j*kw+rkv])
			}
		}
		for t := range T {
			mt := s.mix[t*rkv : (t+1)*rkv]
			for r, v := range s.acc[t*rkv : (t+1)*rkv] {
				mt[r] = float32(v)
			}
		}
		k.m.uv[h].MatMul(k.a[g.row*hm*dv+h*dv:], hm*dv, s.mix[:T*rkv], T)
	}
}

// probs returns query t's attention probabilities over the p0+t+1
// positions it sees, from the current head's queries in s.qc (in s.prob,
// valid until the next call).
func (k *mlaCall) probs(s *mlaScratch, g *mlaSeg, t int) []float32 {
	kw := k.m.cfg.KVLoRA + k.m.cfg.Rope
	ns := g.p0 + t + 1
	sc := s.prob[:ns]
	scoreRows(sc, g.kv[:ns*kw], s.qc[t*kw:(t+1)*kw])
	for i, v := range sc {
		sc[i] = v * k.m.scale
	}
	nn.Softmax(sc, sc)
	return sc
}

// rowSource yields the key half of kv_b a head at a time: row j of head h
// is W_kvb[h·(dn+dv) + j]. The returned slice is valid until the next call
// with the same buf.
type rowSource interface {
	// head returns W_uk,h laid out [dn][Rkv]: in buf (dn·Rkv long) or in
	// the source's own storage.
	head(h int, buf []float32) []float32
}

// decodedRows decodes rows on demand from a RowDecoder (no resident copy).
type decodedRows struct {
	d      quant.RowDecoder
	dn, dv int
}

func (s decodedRows) head(h int, buf []float32) []float32 {
	rkv := len(buf) / s.dn
	for j := range s.dn {
		s.d.DecodeRow(buf[j*rkv:(j+1)*rkv], h*(s.dn+s.dv)+j)
	}
	return buf
}

// denseRows is a resident f32 copy [Hm·dn][Rkv], n = dn·Rkv floats a head.
type denseRows struct {
	w []float32
	n int
}

func (s denseRows) head(h int, _ []float32) []float32 {
	return s.w[h*s.n : (h+1)*s.n : (h+1)*s.n]
}

// newKeyRows binds the key half of kv_b. Every quant matrix decodes rows on
// demand (no resident copy, so a streamed trunk works unchanged); a foreign
// Matrix without quant.RowDecoder gets a one-time f32 copy of that half,
// extracted with a mat-mul against the identity (row · e_c = W[r][c] exactly:
// one exact product plus zeros).
func newKeyRows(kvb quant.Matrix, hm, dn, dv int) rowSource {
	if d, ok := kvb.(quant.RowDecoder); ok {
		return decodedRows{d: d, dn: dn, dv: dv}
	}
	rkv := kvb.Cols()
	eye := make([]float32, rkv*rkv)
	for i := range rkv {
		eye[i*rkv+i] = 1
	}
	w := make([]float32, hm*dn*rkv)
	tr := make([]float32, rkv*dn)
	for h := range hm {
		kvb.Slice(h*(dn+dv), h*(dn+dv)+dn).MatMul(tr, dn, eye, rkv) // tr[c][j] = W[j][c]
		for j := range dn {
			for col := range rkv {
				w[(h*dn+j)*rkv+col] = tr[col*dn+j]
			}
		}
	}
	return denseRows{w: w, n: dn * rkv}
}
