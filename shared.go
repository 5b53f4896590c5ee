package k3

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
)

// A Model's decode steps and prefill chunks share walks over the weights (§4.11): a forward
// that finds a walk running waits in the walker's queue, and when the walk ends the oldest
// waiting forward leads the next one, taking every forward that waits (group commit). Each
// streamed piece of the trunk and each fetched expert is then used by every row before it is
// dropped.

// walker gathers the forwards of a Model's sessions into shared walks.
type walker struct {
	mu    sync.Mutex
	queue []*walkReq // waiting steps, oldest first
	busy  bool       // a walk is running or about to (its leader holds the lead)
	batch []*walkReq // the leader's walk, reused
	// gen counts finished walks; returning is how many forwards of the last one have not come
	// back with their next forward yet (see lead).
	gen       int64
	returning int
	// A leader lingering for the returning forwards waits on back (the last one to come back
	// signals it) or on linger, which bounds the wait; last is how long the last walk took.
	lingering bool
	back      chan struct{}
	linger    *time.Timer
	last      time.Duration
	// share and most bound a linger (see lead); zero values mean maxLingerShare and maxLinger,
	// and share < 0 turns lingering off (tests set them).
	share int
	most  time.Duration

	// The shared walk's scratch, used by the leader only (one walk runs at a time).
	nnWS   *nn.Workspace
	attnWS *attention.Workspace
	moeWS  *moe.Workspace
	stream nn.Stream
	hbuf   []float32 // embeddings, R rows
	out    []float32 // the rows the output aggregation completes
	logits []float32 // [N][V]
	lens   []int     // rows per session of the walk, in batch order
	kda    []*attention.KDAState
	mla    []*attention.MLACache
	attn   []nn.Mixer // by layer, over the walk's rows
	ffn    []nn.Mixer

	walks, rows atomic.Int64 // counters: walks run and the rows they carried
}

// walkReq is one session's forward (a decode step or a prefill chunk) waiting for, or carried
// by, a walk. A Session owns one and
// reuses it, so a step allocates nothing to wait.
type walkReq struct {
	s    *Session
	ctx  context.Context
	ids  []int
	mode logitsMode    // logitsLast, logitsNone (an inner prefill chunk) or logitsAll (PrefillAll)
	id   [1]int        // backing of ids for a decode step
	wake chan struct{} // one signal per wait: the result is in, or the lead is handed over
	// Guarded by walker.mu.
	taken bool  // in a walk: it can no longer leave the queue
	lead  bool  // woken to lead the next walk
	gen   int64 // the walk that last carried it
	// Written by the walk's leader before the wake.
	err error
	at  int       // the layer where its cancellation was seen, −1: none
	all []float32 // logitsAll: every position's logits ([T][V] flat), the caller's to keep
}

// maxWalkRows bounds the rows of one shared walk unless the plan says otherwise: as many as one
// prefill chunk, so a walk's activations are a chunk's plus one logits row per session.
const maxWalkRows = MaxChunk

// step runs one decode position of s through a shared walk and returns its error; on success
// the session has the new position and its logits.
func (m *Model) step(ctx context.Context, s *Session, id int) error {
	s.req.id[0] = id
	return m.gather(ctx, s, s.req.id[:], logitsLast)
}

// gather runs ids as new positions of s through a shared walk, computing the last position's
// logits, none, or every position's (left in s.req.all) as mode says, and returns its error.
// Forwards over the walk's row bound (a PrefillAll of more than MaxChunk) run in a walk alone.
func (m *Model) gather(ctx context.Context, s *Session, ids []int, mode logitsMode) error {
	if err := s.check(ids); err != nil {
		return err
	}
	r := &s.req
	r.ctx, r.ids, r.mode, r.err, r.at, r.all = ctx, ids, mode, nil, -1, nil
	w := &m.walker
	w.mu.Lock()
	if r.gen == w.gen && w.returning > 0 {
		w.returning-- // back from the last walk
		if w.returning == 0 && w.lingering {
			select {
			case w.back <- struct{}{}:
			default:
			}
		}
	}
	if !w.busy {
		w.busy = true
		w.mu.Unlock()
		return m.lead(r)
	}
	w.queue = append(w.queue, r)
	w.mu.Unlock()
	select {
	case <-r.wake:
	case <-ctx.Done():
		w.mu.Lock()
		if !r.taken && !r.lead {
			// Still waiting: leave the queue; nothing was touched and no walk is affected.
			if i := slices.Index(w.queue, r); i >= 0 {
				w.queue = slices.Delete(w.queue, i, i+1)
			}
			w.mu.Unlock()
			r.ctx, r.ids = nil, nil
			return ctx.Err()
		}
		w.mu.Unlock()
		<-r.wake // its walk runs, or the lead was handed to it: either must complete
	}
	w.mu.Lock()
	lead := r.lead
	r.lead = false
	w.mu.Unlock()
	if lead {
		return m.lead(r)
	}
	r.ctx, r.ids = nil, nil
	return r.err
}

// lead runs one walk with r first and every step waiting behind it up to the row bound, wakes
// them, and hands the lead to the oldest step still waiting.
func (m *Model) lead(r *walkReq) error {
	w := &m.walker
	bound := m.plan.WalkRows
	if bound < 1 {
		bound = maxWalkRows
	}
	// Sessions stepping in a loop come back a moment after their walk ends (their caller samples
	// the logits and steps again). Taking the batch at once would leave them to the walk after,
	// and the sessions would settle into groups that alternate walks, each reading the weights
	// for part of them. So the leader first waits for the forwards of the last walk to come
	// back, for at most a small part of a walk's time (maxLingerShare of it, and never over
	// maxLinger): a forward that misses a walk waits a whole one, and a session that does not
	// come back (its generation ended) costs that wait once.
	w.mu.Lock()
	if wait := w.lingerFor(); w.returning > 0 && wait > 0 {
		if w.back == nil {
			w.back = make(chan struct{}, 1)
		}
		w.lingering = true
		w.mu.Unlock()
		w.await(wait)
		w.mu.Lock()
		w.lingering = false
		select {
		case <-w.back: // sent after the timer won: drop it, no forward will send until the next linger
		default:
		}
	}
	if i := slices.Index(w.queue, r); i >= 0 {
		w.queue = slices.Delete(w.queue, i, i+1)
	}
	batch := append(w.batch[:0], r)
	r.taken = true
	rows := len(r.ids)
	n := 0
	for _, q := range w.queue {
		if rows+len(q.ids) > bound {
			break
		}
		q.taken = true
		batch = append(batch, q)
		rows += len(q.ids)
		n++
	}
	w.queue = slices.Delete(w.queue, 0, n)
	w.batch = batch
	w.mu.Unlock()

	t0 := time.Now()
	crash := m.runWalk(batch)
	w.last = time.Since(t0) // the leader's alone: the next leader reads it after the lead passes
	w.walks.Add(1)
	w.rows.Add(int64(rows))

	w.mu.Lock()
	w.gen++
	for _, q := range batch {
		q.taken = false
		q.gen = w.gen
	}
	w.returning = len(batch)
	w.mu.Unlock()
	for _, q := range batch[1:] {
		q.wake <- struct{}{}
	}
	clear(batch) // hold no sessions between walks
	// The lead passes on only now: w.batch is the leader's until then.
	var next *walkReq
	w.mu.Lock()
	if len(w.queue) > 0 {
		next = w.queue[0]
		next.lead = true
	} else {
		w.busy = false
	}
	w.mu.Unlock()
	if next != nil {
		next.wake <- struct{}{}
	}
	r.ctx, r.ids = nil, nil
	if crash != nil {
		panic(crash) // on the leader's goroutine, once the others are released
	}
	return r.err
}

// Lingering bounds, see lead: a walk over K3's weights takes seconds, one over a small
// checkpoint milliseconds, and a session comes back in tens of microseconds (sampling a row of
// logits), or a few hundred when the processors are busy.
const (
	maxLingerShare = 32
	maxLinger      = 10 * time.Millisecond
)

// lingerFor is how long a leader waits at most for the forwards of the last walk.
func (w *walker) lingerFor() time.Duration {
	share, most := w.share, w.most
	if share == 0 {
		share = maxLingerShare
	}
	if most == 0 {
		most = maxLinger
	}
	if share < 0 {
		return 0
	}
	return min(w.last/time.Duration(share), most)
}

// await blocks until the last forward of the last walk is back or d has passed. Only the leader
// calls it, so the timer is its own.
func (w *walker) await(d time.Duration) {
	if w.linger == nil {
		w.linger = time.NewTimer(d)
	} else {
		w.linger.Reset(d)
	}
	select {
	case <-w.back:
		w.linger.Stop()
	case <-w.linger.C:
	}
}

// runWalk runs the walk of batch. A panic in it (a bug, never a read failure: those are errors)
// fails every forward of the walk and is returned, so that the leader can wake the others and
// pass the lead on before re-raising it, instead of leaving them waiting forever.
func (m *Model) runWalk(batch []*walkReq) (crash any) {
	defer func() {
		if p := recover(); p != nil {
			crash = p
			err := fmt.Errorf("k3: shared walk: panic: %v", p)
			for _, q := range batch {
				q.err = err
				q.s.broken = fmt.Errorf("%w: %w", ErrBroken, err)
			}
		}
	}()
	if r := batch[0]; len(batch) == 1 {
		// A walk of one forward is the session's own forward pass.
		var flat []float32
		flat, r.err = r.s.forward(r.ctx, r.ids, r.mode)
		if r.mode == logitsAll && r.err == nil {
			r.all = flat // fresh: forward allocates every position's logits
		}
	} else {
		m.sharedWalk(batch)
	}
	return nil
}

// check refuses what a forward pass over ids would refuse before touching anything: a closed
// model, a broken session, empty input, an id outside the vocabulary. A step refused here never
// joins a walk. The context is the walk's to check, once before the pass as a solo forward
// does (a step waiting in the queue also leaves when it is done).
func (s *Session) check(ids []int) error {
	m := s.m
	m.mu.RLock()
	closed := m.closed
	m.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case s.broken != nil:
		return s.broken
	case len(ids) == 0:
		return ErrEmptyInput
	}
	for i, id := range ids {
		if id < 0 || id >= m.cfg.Vocab {
			return &TokenError{Pos: i, ID: id, Vocab: m.cfg.Vocab}
		}
	}
	return nil
}

// sharedWalk runs the steps of batch as one walk over the layers (§4.11): the rows of every
// session go through each layer's dense projections and experts together, and through
// attention each with its own state. Every session's result (logits or error) is left in its
// request and session.
func (m *Model) sharedWalk(batch []*walkReq) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	failAll := func(err error) {
		for _, r := range batch {
			r.err = err
		}
	}
	if m.closed {
		failAll(ErrClosed)
		return
	}
	// A step whose context ended while it waited leaves untouched, as a solo forward would.
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	w := &m.walker
	c := &m.cfg
	E, V := c.Hidden, c.Vocab
	w.lens = w.lens[:0]
	R := 0
	for _, r := range live {
		w.lens = append(w.lens, len(r.ids))
		R += len(r.ids)
	}
	m.initWalker()
	wt := m.weights
	wt.begin()
	defer wt.end()
	if err := wt.check(); err != nil {
		// A weight file changed since the last walk: nothing is computed, and every session is
		// broken so that no token is drawn from the logits it still holds.
		err = &ForwardError{Layer: -1, Err: err}
		for _, r := range live {
			r.err = err
			r.s.logits, r.s.broken = nil, fmt.Errorf("%w: %w", ErrBroken, err)
		}
		return
	}
	h := reuse(&w.hbuf, R*E)
	rd := m.embed.(quant.RowDecoder) // checked at bind time
	if err := wt.guard(func() error {
		t := 0
		for _, r := range live {
			for _, id := range r.ids {
				rd.DecodeRow(h[t*E:(t+1)*E], id)
				t++
			}
		}
		return nil
	}); err != nil {
		failAll(&ForwardError{Layer: -1, Err: err}) // nothing was computed: the states are intact
		return
	}
	if err := wt.err(); err != nil {
		failAll(&ForwardError{Layer: -1, Err: err})
		return
	}
	// From here on every session's state moves: a failure breaks every session of the walk.
	fail := func(l int, err error) {
		err = &ForwardError{Layer: l, Err: wt.cause(err)}
		for _, r := range live {
			r.err = err
			r.s.broken = fmt.Errorf("%w: %w", ErrBroken, err)
		}
	}
	st := &w.stream
	if err := st.Reset(h, R, E); err != nil {
		failAll(fmt.Errorf("k3: forward: %w", err))
		return
	}
	defer st.Drop()
	N := len(live)
	w.kda, w.mla = slices.Grow(w.kda[:0], N)[:N], slices.Grow(w.mla[:0], N)[:N]
	defer func() { clear(w.kda); clear(w.mla) }() // hold no session state between walks
	var lerr error
	at := -1
	if err := wt.guard(func() error {
		for l := range m.layers {
			at = l
			// A cancelled session's rows still go through the walk (the others' rows do not
			// depend on them); the session fails at the layer where it was seen, as alone.
			for _, r := range live {
				if r.at < 0 && r.ctx.Err() != nil {
					r.at = l
				}
			}
			for i, r := range live {
				w.kda[i], w.mla[i] = r.s.kda[l], r.s.mla[l]
			}
			var t0 time.Time
			if m.tracer != nil {
				t0 = time.Now()
			}
			lerr = m.layers[l].res.ForwardFrom(st, w.attn[l], w.ffn[l], m.threads, w.nnWS, 0)
			if werr := wt.err(); werr != nil {
				lerr = werr
			}
			if lerr != nil {
				return nil
			}
			if m.tracer != nil {
				m.tracer.LayerDone(l, time.Since(t0))
			}
		}
		return nil
	}); err != nil {
		fail(at, err)
		return
	}
	if lerr != nil {
		fail(at, lerr)
		return
	}
	all := reuse(&w.out, R*E)
	if err := st.AggregateFrom(all, m.outAgg, 0, m.threads, w.nnWS); err != nil {
		fail(-1, err)
		return
	}
	// The rows of each forward that asks for logits, packed in batch order: the last one, or
	// every one for PrefillAll (an inner prefill chunk asks for none).
	last, t, nh := all[:0], 0, 0
	for _, r := range live {
		from := t + len(r.ids) - 1
		if r.mode == logitsAll {
			from = t
		}
		t += len(r.ids)
		if r.mode != logitsNone {
			last = append(last, all[from*E:t*E]...) // never overtakes the rows it reads: from ≥ len(last)/E
			nh += t - from
		}
	}
	logits := reuse(&w.logits, nh*V)
	if nh > 0 {
		m.norm.RMSNormRows(last, last, m.eps)
		if err := wt.guard(func() error { quant.MatMulParallel(m.lmHead, logits, V, last, nh, m.threads); return nil }); err != nil {
			fail(-1, err)
			return
		}
	}
	// Nothing computed from weights that failed a read or shrank under their mapping is reported.
	if err := wt.settle(); err != nil {
		for _, r := range live {
			r.s.logits = nil
		}
		fail(-1, err)
		return
	}
	i := 0
	for _, r := range live {
		s := r.s
		var row []float32 // the last position's logits
		switch r.mode {
		case logitsLast:
			row = logits[i*V : (i+1)*V]
			i++
		case logitsAll:
			T := len(r.ids)
			if r.at < 0 {
				r.all = append([]float32(nil), logits[i*V:(i+T)*V]...) // the caller's, as alone
			}
			row = logits[(i+T-1)*V : (i+T)*V]
			i += T
		}
		if r.at >= 0 {
			err := &ForwardError{Layer: r.at, Err: r.ctx.Err()}
			r.err = err
			s.broken = fmt.Errorf("%w: %w", ErrBroken, err)
			continue
		}
		s.pos += len(r.ids)
		if r.mode == logitsNone {
			s.logits = nil
			continue
		}
		if cap(s.logbuf) < V {
			s.logbuf = make([]float32, V)
		}
		s.logits = s.logbuf[:V]
		copy(s.logits, row)
	}
}

// initWalker builds the walk's scratch and its per-layer mixers on the first shared walk.
func (m *Model) initWalker() {
	w := &m.walker
	if w.attn != nil {
		return
	}
	w.nnWS, w.attnWS, w.moeWS = nn.NewWorkspace(), attention.NewWorkspace(), moe.NewWorkspace()
	w.attn, w.ffn = make([]nn.Mixer, len(m.layers)), make([]nn.Mixer, len(m.layers))
	for l := range m.layers {
		lay := &m.layers[l]
		if k := lay.kda; k != nil {
			w.attn[l] = func(dst, x []float32, _, _ int) error { return k.ForwardBatch(dst, x, w.lens, w.kda, w.attnWS) }
		} else {
			a := lay.mla
			w.attn[l] = func(dst, x []float32, _, _ int) error { return a.ForwardBatch(dst, x, w.lens, w.mla, w.attnWS) }
		}
		f := lay.ffn
		w.ffn[l] = func(dst, x []float32, T, _ int) error { return f.ForwardWith(dst, x, T, w.moeWS) }
	}
}
