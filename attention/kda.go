package attention

import (
	"fmt"
	"math"
	"sync"

	"github.com/k3-project/k3/internal/kernels/fmath"
	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/quant"
)

// KDAConfig is the shape of one KDA layer. Float parameters are the config
// values rounded to float32 (§5.1).
type KDAConfig struct {
	Hidden  int     // E, model width
	Heads   int     // H
	HeadDim int     // D (d_k = d_v = D)
	ConvK   int     // K, short-convolution kernel
	GateLB  float32 // gate lower bound (negative), e.g. −5
	RMSEps  float32 // eps of the head-wise output RMSNorm
	// Workers bounds the goroutines used for mat-mul rows and heads; ≤ 1 runs
	// serially. Results never depend on it.
	Workers int
	// Pool, when set, runs the splits of heads and channels (the mat-muls
	// split as their matrices do); nil starts goroutines per call.
	Pool Runner
}

// KDAWeights are the tensors of one KDA layer (`self_attn.` names of
// §3.3). Matrices are [out, in]; P = H·D.
type KDAWeights struct {
	Q, K, V quant.Matrix // q_proj, k_proj, v_proj [P, E]
	G       quant.Matrix // g_proj [P, E], full-rank output gate
	B       quant.Matrix // b_proj [H, E]
	FA      quant.Matrix // f_a_proj [D, E]
	FB      quant.Matrix // f_b_proj [P, D]
	O       quant.Matrix // o_proj [E, P]
	// Depthwise taps [P][K] (the checkpoint's [P,1,K]), tap 0 = oldest.
	QConv, KConv, VConv []float32
	ALog                []float32 // A_log: H or more entries; entry h is head h's log rate
	DtBias              []float32 // dt_bias [P]
	ONorm               []float32 // o_norm.weight [D], shared by all heads
}

// KDA is one bound Kimi Delta Attention layer. It is immutable and safe for
// concurrent use by sequences with distinct states.
type KDA struct {
	cfg                 KDAConfig
	w                   KDAWeights
	convQ, convK, convV *nn.ShortConv
	rate                []float32 // A_h = f32(exp(f64(A_log[h]))), per head
	oNorm               nn.Vec    // w.ONorm as narrow as its values allow (nn.Narrowest); w keeps none
	qScale              float32   // f32(1/sqrt(f64(D)))
	pool                sync.Pool // *Workspace for calls that bring none
	// minWork is parallel.MinWork: the fewest operations worth a goroutine
	// when heads are split. In-package tests set 1 to force the split on
	// small layers, which must not change a bit.
	minWork int
}

// NewKDA validates the weights against cfg and binds them.
func NewKDA(cfg KDAConfig, w KDAWeights) (*KDA, error) {
	cfg.Pool = parallel.RunnerOr(cfg.Pool)
	e, h, d := cfg.Hidden, cfg.Heads, cfg.HeadDim
	if e <= 0 || h <= 0 || d <= 0 || cfg.ConvK < 1 {
		return nil, fmt.Errorf("attention: kda: invalid shape hidden=%d heads=%d head_dim=%d conv_k=%d", e, h, d, cfg.ConvK)
	}
	if !(cfg.GateLB < 0) || !(cfg.RMSEps > 0) {
		return nil, fmt.Errorf("attention: kda: gate lower bound %v must be < 0 and rms eps %v > 0", cfg.GateLB, cfg.RMSEps)
	}
	p := h * d
	mats := []struct {
		name       string
		m          quant.Matrix
		rows, cols int
	}{
		{"q_proj", w.Q, p, e}, {"k_proj", w.K, p, e}, {"v_proj", w.V, p, e}, {"g_proj", w.G, p, e},
		{"b_proj", w.B, h, e}, {"f_a_proj", w.FA, d, e}, {"f_b_proj", w.FB, p, d}, {"o_proj", w.O, e, p},
	}
	for _, m := range mats {
		if err := checkMatrix("kda", m.name, m.m, m.rows, m.cols); err != nil {
			return nil, err
		}
	}
	if len(w.ALog) < h {
		return nil, fmt.Errorf("attention: kda: A_log has %d entries, want at least heads = %d", len(w.ALog), h)
	}
	vecs := []struct {
		name string
		v    []float32
		n    int
	}{{"dt_bias", w.DtBias, p}, {"o_norm", w.ONorm, d}}
	for _, v := range vecs {
		if len(v.v) != v.n {
			return nil, fmt.Errorf("attention: kda: %s has %d entries, want %d", v.name, len(v.v), v.n)
		}
	}
	k := &KDA{cfg: cfg, w: w, minWork: parallel.MinWork, rate: make([]float32, h), qScale: float32(1 / math.Sqrt(float64(d))),
		oNorm: nn.Narrowest(w.ONorm)}
	k.w.ONorm = nil
	var err error
	for _, c := range []struct {
		name string
		taps []float32
		dst  **nn.ShortConv
	}{{"q_conv1d", w.QConv, &k.convQ}, {"k_conv1d", w.KConv, &k.convK}, {"v_conv1d", w.VConv, &k.convV}} {
		if *c.dst, err = nn.NewShortConv(p, cfg.ConvK, c.taps); err != nil {
			return nil, fmt.Errorf("attention: kda: %s: %w", c.name, err)
		}
	}
	for i := range h {
		k.rate[i] = fmath.Exp32(w.ALog[i])
	}
	// The convolutions keep their taps in their own layout: holding the caller's copies too
	// would double the largest side vectors (§8.5).
	k.w.QConv, k.w.KConv, k.w.VConv = nil, nil, nil
	return k, nil
}

// Config returns the layer's configuration.
func (k *KDA) Config() KDAConfig { return k.cfg }

// KDAState is the per-sequence state of one KDA layer: the recurrent state S
// ([H][D][D], row = key channel, column = value channel) and the three
// short-convolution tails ([P][K−1] each, the last K−1 raw projection
// outputs, oldest first). The zero state is a fresh sequence.
type KDAState struct {
	H, D, K             int
	S                   []float32
	ConvQ, ConvK, ConvV []float32
}

// NewState returns a fresh (zero) state for this layer.
func (k *KDA) NewState() *KDAState {
	h, d, kk := k.cfg.Heads, k.cfg.HeadDim, k.cfg.ConvK
	p := h * d
	return &KDAState{
		H: h, D: d, K: kk,
		S:     make([]float32, h*d*d),
		ConvQ: make([]float32, p*(kk-1)),
		ConvK: make([]float32, p*(kk-1)),
		ConvV: make([]float32, p*(kk-1)),
	}
}

// Clone returns a deep copy (a snapshot).
func (s *KDAState) Clone() *KDAState {
	c := *s
	c.S = append([]float32(nil), s.S...)
	c.ConvQ = append([]float32(nil), s.ConvQ...)
	c.ConvK = append([]float32(nil), s.ConvK...)
	c.ConvV = append([]float32(nil), s.ConvV...)
	return &c
}

// CopyFrom overwrites s with o (restoring a snapshot without allocating).
func (s *KDAState) CopyFrom(o *KDAState) error {
	if s.H != o.H || s.D != o.D || s.K != o.K || len(s.S) != len(o.S) ||
		len(s.ConvQ) != len(o.ConvQ) || len(s.ConvK) != len(o.ConvK) || len(s.ConvV) != len(o.ConvV) {
		return fmt.Errorf("attention: kda state: shape H=%d D=%d K=%d, source H=%d D=%d K=%d", s.H, s.D, s.K, o.H, o.D, o.K)
	}
	copy(s.S, o.S)
	copy(s.ConvQ, o.ConvQ)
	copy(s.ConvK, o.ConvK)
	copy(s.ConvV, o.ConvV)
	return nil
}

// Reset returns the state to a fresh sequence.
func (s *KDAState) Reset() {
	clear(s.S)
	clear(s.ConvQ)
	clear(s.ConvK)
	clear(s.ConvV)
}

func (k *KDA) checkState(st *KDAState) error {
	h, d, kk := k.cfg.Heads, k.cfg.HeadDim, k.cfg.ConvK
	p := h * d
	if st == nil || st.H != h || st.D != d || st.K != kk || len(st.S) != h*d*d ||
		len(st.ConvQ) != p*(kk-1) || len(st.ConvK) != p*(kk-1) || len(st.ConvV) != p*(kk-1) {
		return fmt.Errorf("attention: kda: state does not match the layer (H=%d D=%d K=%d)", h, d, kk)
	}
	return nil
}

// Forward runs T ≥ 1 new positions through the layer (§4.5), advancing
// st. x holds the T RMS-normalised layer inputs ([T][E]); dst receives the
// T outputs ([T][E]); they must not alias. Any split of a sequence into
// Forward calls gives bit-identical outputs and state.
//
// Per position: projections (R16/RG mat-muls); ShortConv+SiLU of q, k, v
// with the carried tails; per-head L2Norm of q and k; q̂ = q ⊗ f32(D^−½);
// β = σ(b); α_i = exp(GateLB ⊗ σ(A_h ⊗ (z_i ⊕ dt_i))) with A_h per head; the
// delta-rule recurrence per head (decay → read → write → output from the
// updated state, f32 accumulators, i ascending); head-wise RMSNorm (RMSEps);
// o ⊗ σ(G); o_proj.
func (k *KDA) Forward(dst, x []float32, T int, st *KDAState) error {
	ws, _ := k.pool.Get().(*Workspace)
	if ws == nil {
		ws = new(Workspace)
	}
	err := k.ForwardWith(dst, x, T, st, ws)
	k.pool.Put(ws)
	return err
}

// ForwardWith is Forward using the caller's scratch memory: with a reused
// ws a decode step (T = 1) makes no heap allocation of its own on one
// worker. ws must not be used concurrently by another call; nil borrows one
// from the layer's pool. Results are bit-identical to Forward.
func (k *KDA) ForwardWith(dst, x []float32, T int, st *KDAState, ws *Workspace) error {
	if ws == nil {
		return k.Forward(dst, x, T, st)
	}
	if err := k.checkState(st); err != nil {
		return err
	}
	ws.kdaOne[0] = kdaSeg{n: T, st: st}
	err := k.forward(dst, x, T, ws.kdaOne[:], ws)
	ws.kdaOne[0] = kdaSeg{}
	return err
}

// ForwardBatch runs the new positions of several sequences through the layer in one call:
// sequence i owns lens[i] ≥ 1 consecutive rows of x and dst (in order) and advances states[i].
// The projections run as one mat-mul over all rows and the convolutions and recurrences per
// sequence, so every sequence's outputs and state are bit-identical to its own ForwardWith
// call (§4.11). ws is as for ForwardWith (nil borrows one).
func (k *KDA) ForwardBatch(dst, x []float32, lens []int, states []*KDAState, ws *Workspace) error {
	if len(lens) == 0 || len(lens) != len(states) {
		return fmt.Errorf("attention: kda: batch of %d lengths and %d states", len(lens), len(states))
	}
	if ws == nil {
		ws, _ = k.pool.Get().(*Workspace)
		if ws == nil {
			ws = new(Workspace)
		}
		defer k.pool.Put(ws)
	}
	segs := ws.kdaSegs[:0]
	T := 0
	for i, n := range lens {
		if n < 1 {
			return fmt.Errorf("attention: kda: batch sequence %d has %d positions", i, n)
		}
		if err := k.checkState(states[i]); err != nil {
			return fmt.Errorf("attention: kda: batch sequence %d: %w", i, err)
		}
		segs = append(segs, kdaSeg{n: n, st: states[i]})
		T += n
	}
	ws.kdaSegs = segs
	err := k.forward(dst, x, T, segs, ws)
	clear(segs) // hold no references to the caller's states
	return err
}

// kdaSeg is one sequence of a call: its number of rows and its state.
type kdaSeg struct {
	n  int
	st *KDAState
}

// forward runs T rows, split into the sequences segs, through the layer.
func (k *KDA) forward(dst, x []float32, T int, segs []kdaSeg, ws *Workspace) error {
	c := k.cfg
	e, h, d := c.Hidden, c.Heads, c.HeadDim
	p := h * d
	if T < 1 || len(x) != T*e || len(dst) != T*e {
		return fmt.Errorf("attention: kda: len(x)=%d len(dst)=%d, want T·E = %d·%d", len(x), len(dst), T, e)
	}
	wk := c.Pool.Limit(c.Workers)
	ws.f32.Reset(6*T*p + T*d + T*h + 2*h*d)
	kc := &ws.kda
	*kc = kdaCall{k: k, T: T,
		q: ws.f32.Take(T * p), kk: ws.f32.Take(T * p), v: ws.f32.Take(T * p), g: ws.f32.Take(T * p),
		z: ws.f32.Take(T * p), o: ws.f32.Take(T * p), fa: ws.f32.Take(T * d), b: ws.f32.Take(T * h),
		u: ws.f32.Take(h * d), e: ws.f32.Take(h * d)}
	quant.MatMulParallel(k.w.Q, kc.q, p, x, T, wk)
	quant.MatMulParallel(k.w.K, kc.kk, p, x, T, wk)
	quant.MatMulParallel(k.w.V, kc.v, p, x, T, wk)
	quant.MatMulParallel(k.w.G, kc.g, p, x, T, wk)
	quant.MatMulParallel(k.w.FA, kc.fa, d, x, T, wk)
	quant.MatMulParallel(k.w.FB, kc.z, p, kc.fa, T, wk)
	quant.MatMulParallel(k.w.B, kc.b, h, x, T, wk)

	// The convolutions carry each sequence's tails, so they run sequence by sequence. Shapes
	// were checked by the callers, so they cannot fail.
	off := 0
	for _, sg := range segs {
		q, kk, v := kc.q[off*p:(off+sg.n)*p], kc.kk[off*p:(off+sg.n)*p], kc.v[off*p:(off+sg.n)*p]
		_ = k.convQ.ForwardPool(q, q, sg.st.ConvQ, sg.n, wk, c.Pool, &ws.conv)
		_ = k.convK.ForwardPool(kk, kk, sg.st.ConvK, sg.n, wk, c.Pool, &ws.conv)
		_ = k.convV.ForwardPool(v, v, sg.st.ConvV, sg.n, wk, c.Pool, &ws.conv)
		off += sg.n
	}

	// The splits below only take chunks worth a goroutine, so the small
	// fixture models run inline. A (position, head) pair of prepare or gate
	// costs a few dozen operations per channel (an exp or a sigmoid each); a
	// head of the recurrence about 4·D² multiply-adds per position.
	pairGrain := max(4, parallel.GrainFor(32*d, k.minWork))

	// Per position and head (independent): normalise q and k, scale q, β,
	// and the decay α (written over z).
	c.Pool.Run(T*h, wk, pairGrain, (*kdaPrepare)(kc))
	// The recurrence is sequential in t and independent across heads and sequences: each
	// sequence's rows run through its own state, the call's arrays cut to them.
	all := *kc
	off = 0
	for _, sg := range segs {
		kc.st, kc.T = sg.st, sg.n
		kc.q, kc.kk, kc.v, kc.z, kc.o = all.q[off*p:], all.kk[off*p:], all.v[off*p:], all.z[off*p:], all.o[off*p:]
		kc.b = all.b[off*h:]
		c.Pool.Run(h, wk, parallel.GrainFor(4*d*d*sg.n, k.minWork), (*kdaRecur)(kc))
		off += sg.n
	}
	*kc = all
	// Head-wise RMSNorm (eps = RMSEps), then the sigmoid gate, then o_proj.
	c.Pool.Run(T*h, wk, pairGrain, (*kdaGate)(kc))
	quant.MatMulParallel(k.w.O, dst, e, kc.o, T, wk)
	*kc = kdaCall{} // drop references to the caller's data
	return nil
}

// kdaCall is the state of one ForwardWith call shared by the workers.
type kdaCall struct {
	k                              *KDA
	st                             *KDAState
	T                              int
	q, kk, v, g, z, o, fa, b, u, e []float32
}

// The three splits of a call as parallel.Tasks: views of the call that
// reaches Pool.Run as a pointer it already has, so no split allocates.
type (
	kdaPrepare kdaCall
	kdaRecur   kdaCall
	kdaGate    kdaCall
)

func (t *kdaPrepare) Run(lo, hi int) { (*kdaCall)(t).prepare(lo, hi) }
func (t *kdaRecur) Run(lo, hi int)   { (*kdaCall)(t).recur(lo, hi) }
func (t *kdaGate) Run(lo, hi int)    { (*kdaCall)(t).gate(lo, hi) }

// prepare normalises q and k, scales q, and computes β and α (over z) for
// the (position, head) pairs [lo, hi).
func (kc *kdaCall) prepare(lo, hi int) {
	c := kc.k.cfg
	h, d := c.Heads, c.HeadDim
	p := h * d
	q, kk, z, b := kc.q, kc.kk, kc.z, kc.b
	for th := lo; th < hi; th++ {
		t, hh := th/h, th%h
		o := t*p + hh*d
		nn.L2Norm(q[o:o+d], q[o:o+d])
		for i := o; i < o+d; i++ {
			q[i] = q[i] * kc.k.qScale
		}
		nn.L2Norm(kk[o:o+d], kk[o:o+d])
		rate, dt := kc.k.rate[hh], kc.k.w.DtBias[hh*d:hh*d+d]
		// α = exp32(g), g = GateLB ⊗ σ(A_h ⊗ (z ⊕ dt)) ∈ [GateLB, 0] (§5.3;
		// σ may underflow to 0, making α = 1 exactly), in stages over the head
		// so that the sigmoid and the exp run through the vector forms.
		zh := z[o : o+d]
		for i := range zh {
			zh[i] = rate * (zh[i] + dt[i])
		}
		fmath.Sigmoid32s(zh, zh)
		for i := range zh {
			zh[i] = c.GateLB * zh[i]
		}
		fmath.Exp32s(zh, zh)
		b[th] = fmath.Sigmoid32(b[th])
	}
}

// recur runs the recurrence of heads [lo, hi) over the call's positions.
func (kc *kdaCall) recur(lo, hi int) {
	c := kc.k.cfg
	h, d := c.Heads, c.HeadDim
	alpha, beta := kc.z, kc.b
	for hh := lo; hh < hi; hh++ {
		S := kc.st.S[hh*d*d : (hh+1)*d*d]
		u, e := kc.u[hh*d:(hh+1)*d], kc.e[hh*d:(hh+1)*d]
		kdaSteps(S, kc.q, kc.kk, kc.v, alpha, beta, kc.o, u, e, kc.T, hh, h)
	}
}

// kdaSteps advances head hh's state S ([D][D]) over T ≥ 1 positions and
// writes their outputs (rows of q, k, v, α and o p = h·D apart, β h apart).
// Per position (§5.3), all in f32 with separate roundings:
//
//	S[i][j] = α_i ⊗ S[i][j]
//	u_j = Σ_i (k_i ⊗ S[i][j])          f32 accumulator from +0, i ascending
//	S[i][j] = S[i][j] ⊕ ((k_i ⊗ β) ⊗ (v_j ⊖ u_j))
//	o_j = Σ_i (q̂_i ⊗ S[i][j])          f32 accumulator from +0, i ascending
//
// with one pass over S per position instead of two: position t's
// write-and-output pass and position t+1's decay-and-read pass touch each
// state element in turn (writeDecay), so every element and every
// accumulator (o_t and u_{t+1}, i ascending) sees the operations above in
// their order (the tests hold it to kdaStep, the two-pass statement). u and
// e are scratch of length D.
func kdaSteps(S, q, k, v, alpha, beta, o, u, e []float32, T, hh, h int) {
	d := len(u)
	p := h * d
	row := func(a []float32, t int) []float32 { return a[t*p+hh*d : t*p+hh*d+d] }
	clear(u)
	k0, a0 := row(k, 0), row(alpha, 0)
	for i := range d {
		decayRead(S[i*d:i*d+d], u, a0[i], k0[i])
	}
	for t := range T {
		vt := row(v, t)
		for j := range e {
			e[j] = vt[j] - u[j]
		}
		ot, qt, kt := row(o, t), row(q, t), row(k, t)
		b := beta[t*h+hh]
		if t+1 == T {
			clear(ot)
			for i := range d {
				writeOut(S[i*d:i*d+d], ot, e, kt[i]*b, qt[i])
			}
			return
		}
		writeDecayRows(S, ot, e, u, kt, b, qt, row(alpha, t+1), row(k, t+1))
	}
}

// gate applies the head-wise RMSNorm and the sigmoid gate to the (position,
// head) pairs [lo, hi).
func (kc *kdaCall) gate(lo, hi int) {
	c := kc.k.cfg
	d := c.HeadDim
	o, g := kc.o, kc.g
	for th := lo; th < hi; th++ {
		o0 := th * d // (t·p + hh·d) with p = h·d
		kc.k.oNorm.RMSNorm(o[o0:o0+d], o[o0:o0+d], c.RMSEps)
		nn.MulSigmoid(o[o0:o0+d], o[o0:o0+d], g[o0:o0+d])
	}
}

func checkMatrix(layer, name string, m quant.Matrix, rows, cols int) error {
	if m == nil {
		return fmt.Errorf("attention: %s: %s is missing", layer, name)
	}
	if m.Rows() != rows || m.Cols() != cols {
		return fmt.Errorf("attention: %s: %s is [%d, %d], want [%d, %d]", layer, name, m.Rows(), m.Cols(), rows, cols)
	}
	return nil
}
