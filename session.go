package k3

import (
	"context"
	"fmt"
	"time"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/sample"
)

// Session is one sequence being decoded: per KDA layer the recurrent state and the three
// short-convolution tails, per MLA layer the latent cache, the number of positions processed and
// the logits of the last one (§4.10). A Session is not safe for concurrent use; many
// Sessions of one Model may run concurrently.
type Session struct {
	m      *Model
	kda    []*attention.KDAState // by layer; nil for MLA layers
	mla    []*attention.MLACache // by layer; nil for KDA layers
	pos    int
	ids    []int     // the ids of the processed positions (penalties, prompt lookup, state files)
	logits []float32 // last position's logits, nil before the first call
	broken error

	// Scratch memory and the per-layer mixers that use it, built once so a decode step
	// allocates no closures and no layer scratch.
	nnWS *nn.Workspace
	// Per-pass buffers kept for the next pass when small (nn.MaxReused elements): a decode step
	// then allocates nothing for its embeddings, stream, output rows or logits.
	stream            nn.Stream
	hbuf, out, logbuf []float32
	attnWS            *attention.Workspace
	moeWS             *moe.Workspace
	attn              []nn.Mixer // by layer
	ffn               []nn.Mixer // by layer

	req walkReq // its forward's place in a shared walk (§4.11)
}

// NewSession returns a session with no positions.
func (m *Model) NewSession() *Session {
	n := len(m.layers)
	s := &Session{m: m, kda: make([]*attention.KDAState, n), mla: make([]*attention.MLACache, n),
		nnWS: nn.NewWorkspace(), attnWS: attention.NewWorkspace(), moeWS: moe.NewWorkspace(),
		attn: make([]nn.Mixer, n), ffn: make([]nn.Mixer, n)}
	s.req = walkReq{s: s, wake: make(chan struct{}, 1), at: -1}
	for l := range m.layers {
		lay := &m.layers[l]
		if k := lay.kda; k != nil {
			st := k.NewState()
			s.kda[l] = st
			s.attn[l] = func(dst, x []float32, T, _ int) error { return k.ForwardWith(dst, x, T, st, s.attnWS) }
		} else {
			a, c := lay.mla, lay.mla.NewCache()
			s.mla[l] = c
			s.attn[l] = func(dst, x []float32, T, from int) error { return a.ForwardFrom(dst, x, T, c, s.attnWS, from) }
		}
		f := lay.ffn
		s.ffn[l] = func(dst, x []float32, T, _ int) error { return f.ForwardWith(dst, x, T, s.moeWS) }
	}
	return s
}

// Len returns the number of positions the session has processed.
func (s *Session) Len() int { return s.pos }

// Prefill processes T = len(ids) ≥ 1 new positions, carrying the session's state, and keeps the
// last position's logits for Logits. Splitting a sequence into any number of Prefill calls gives
// bit-identical logits and state (§4.10).
//
// Long inputs are processed in chunks of at most MaxChunk positions, which bounds activation
// memory without changing a bit. Chunks of sessions of one Model that run at the same time
// share walks with each other and with decode steps (§4.11), each bit-identical to alone.
func (s *Session) Prefill(ctx context.Context, ids []int) error {
	for len(ids) > MaxChunk {
		if err := s.m.gather(ctx, s, ids[:MaxChunk], logitsNone); err != nil {
			return err
		}
		s.ids = append(s.ids, ids[:MaxChunk]...)
		ids = ids[MaxChunk:]
	}
	if err := s.m.gather(ctx, s, ids, logitsLast); err != nil {
		return err
	}
	s.ids = append(s.ids, ids...)
	return nil
}

// MaxChunk is the most positions Prefill runs through the layers in one pass.
const MaxChunk = 512

// logitsMode says which positions' logits a forward pass computes.
type logitsMode uint8

const (
	logitsNone logitsMode = iota // an inner chunk of a long prefill: skip the head
	logitsLast                   // generation needs the last position only
	logitsAll                    // teacher forcing
)

// PrefillAll is Prefill returning the logits of every new position ([T][V], rows sharing one
// backing array), for teacher forcing, scoring and speculative verification. Its rows share
// walks with other sessions' steps and chunks (§4.11), each bit-identical to alone.
func (s *Session) PrefillAll(ctx context.Context, ids []int) ([][]float32, error) {
	err := s.m.gather(ctx, s, ids, logitsAll)
	flat := s.req.all
	s.req.all = nil // the caller's now: the session keeps no reference
	if err != nil {
		return nil, err
	}
	s.ids = append(s.ids, ids...)
	return splitRows(flat, len(ids), s.m.cfg.Vocab), nil
}

// Step processes one new position (Prefill with T = 1). Steps of sessions of one Model that
// run at the same time share walks over the weights (§4.11), each session's result
// bit-identical to its step alone; a step's cancelled context fails that step only.
func (s *Session) Step(ctx context.Context, id int) error {
	if err := s.m.step(ctx, s, id); err != nil {
		return err
	}
	s.ids = append(s.ids, id)
	return nil
}

// IDs returns a copy of the token ids of the processed positions, in order.
func (s *Session) IDs() []int { return append([]int(nil), s.ids...) }

// Logits returns a copy of the last processed position's logits, or nil before the first call.
func (s *Session) Logits() []float32 {
	if s.logits == nil {
		return nil
	}
	return append([]float32(nil), s.logits...)
}

// Next returns the greedy pick from the last position's logits (Argmax).
func (s *Session) Next() (int, error) {
	if s.broken != nil {
		return 0, s.broken
	}
	if s.logits == nil {
		return 0, ErrNoLogits
	}
	id, err := sample.Argmax(s.logits)
	if err == nil {
		s.m.generated.Add(1)
	}
	return id, err
}

// Reset returns the session to zero positions (fresh state), clearing any ErrBroken.
func (s *Session) Reset() {
	for l := range s.kda {
		if s.kda[l] != nil {
			s.kda[l].Reset()
		}
		if s.mla[l] != nil {
			s.mla[l].Reset()
		}
	}
	s.pos, s.ids, s.logits, s.broken = 0, s.ids[:0], nil, nil
}

// mlaCacheBytes returns the bytes the session's MLA caches hold now (latent form).
func (s *Session) mlaCacheBytes() int64 {
	var n int64
	for _, c := range s.mla {
		if c != nil {
			n += 4 * int64(len(c.KV))
		}
	}
	return n
}

// Forward runs ids through a fresh session and returns the logits of every position ([T][V]):
// one teacher-forced pass.
func (m *Model) Forward(ctx context.Context, ids []int) ([][]float32, error) {
	return m.NewSession().PrefillAll(ctx, ids)
}

// layer runs decoder layer l of a forward pass over st.
func (s *Session) layer(ctx context.Context, l int, st *nn.Stream, from int) error {
	m := s.m
	if err := ctx.Err(); err != nil {
		return err
	}
	var t0 time.Time
	if m.tracer != nil {
		t0 = time.Now()
	}
	// MLA leaves the rows before from without outputs (KDA computes them with its state).
	err := m.layers[l].res.ForwardFrom(st, s.attn[l], s.ffn[l], m.threads, s.nnWS, from)
	// A streamed matrix that could not read its bytes leaves NaN and records the error: whatever
	// this layer computed is discarded with the session's consistency, and when the NaN made the
	// layer fail, the read is the cause to report.
	if werr := m.weights.err(); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if m.tracer != nil {
		m.tracer.LayerDone(l, time.Since(t0))
	}
	return nil
}

// reuse returns buf resized to n, reallocating when it is too small; buffers over nn.MaxReused
// elements are not kept, so a long prefill leaves no large buffer behind in the session.
func reuse(buf *[]float32, n int) []float32 {
	if n > nn.MaxReused {
		return make([]float32, n)
	}
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	return (*buf)[:n]
}

func splitRows(flat []float32, t, v int) [][]float32 {
	rows := make([][]float32, t)
	for i := range rows {
		rows[i] = flat[i*v : (i+1)*v : (i+1)*v]
	}
	return rows
}

// forward runs the whole model (§4.2) over ids as new positions of the session and returns
// the logits mode asks for ([T][V] flat, [V], or nil).
func (s *Session) forward(ctx context.Context, ids []int, mode logitsMode) ([]float32, error) {
	m := s.m
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	if s.broken != nil {
		return nil, s.broken
	}
	c := &m.cfg
	if len(ids) == 0 {
		return nil, ErrEmptyInput
	}
	for i, id := range ids {
		if id < 0 || id >= c.Vocab {
			return nil, &TokenError{Pos: i, ID: id, Vocab: c.Vocab}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err // nothing was touched yet: the session stays usable
	}
	w := m.weights
	w.begin()
	defer w.end()
	if err := w.check(); err != nil {
		// A weight file changed since the last pass: nothing is computed, and the session is
		// broken so that no token is drawn from the logits it still holds.
		err = &ForwardError{Layer: -1, Err: err}
		s.logits, s.broken = nil, fmt.Errorf("%w: %w", ErrBroken, err)
		return nil, err
	}
	T, E, V := len(ids), c.Hidden, c.Vocab
	h := reuse(&s.hbuf, T*E)
	rd := m.embed.(quant.RowDecoder) // checked at bind time
	if err := w.guard(func() error {
		for t, id := range ids {
			rd.DecodeRow(h[t*E:(t+1)*E], id)
		}
		return nil
	}); err != nil {
		return nil, &ForwardError{Layer: -1, Err: err} // nothing was computed: the state is intact
	}
	fail := func(l int, err error) error {
		err = &ForwardError{Layer: l, Err: w.cause(err)}
		s.broken = fmt.Errorf("%w: %w", ErrBroken, err)
		return err
	}
	if err := w.err(); err != nil {
		// Nothing was computed yet, but the embedding could not be read: the state is intact.
		return nil, &ForwardError{Layer: -1, Err: err}
	}
	st := &s.stream
	if err := st.Reset(h, T, E); err != nil {
		return nil, fmt.Errorf("k3: forward: %w", err)
	}
	defer st.Drop()
	// One guard for the whole walk (its workers re-raise faults on this goroutine), not one
	// closure per layer: at is the layer running when a mapped read faults.
	// Without every position's logits, the last layer's FFN runs for the last position only
	// (from on): no later layer reads the other rows, and its attention, run for every
	// position, leaves the state later passes read (see nn.Residual.ForwardFrom).
	from := T - 1
	if mode == logitsAll {
		from = 0
	}
	var lerr error
	at := -1
	if err := w.guard(func() error {
		for l := range m.layers {
			at = l
			lf := 0
			if l == len(m.layers)-1 {
				lf = from
			}
			if lerr = s.layer(ctx, l, st, lf); lerr != nil {
				break
			}
		}
		return nil
	}); err != nil {
		return nil, fail(at, err)
	}
	if lerr != nil {
		return nil, fail(at, lerr)
	}
	if mode == logitsNone {
		s.pos += T
		s.logits = nil
		return nil, nil
	}
	out := reuse(&s.out, (T-from)*E) // the rows the last layer completed
	if err := st.AggregateFrom(out, m.outAgg, from, m.threads, s.nnWS); err != nil {
		return nil, fail(-1, err)
	}
	var logits []float32
	switch mode {
	case logitsAll:
		m.norm.RMSNormRows(out, out, m.eps)
		logits = make([]float32, T*V)
		if err := w.guard(func() error { quant.MatMulParallel(m.lmHead, logits, V, out, T, m.threads); return nil }); err != nil {
			return nil, fail(-1, err)
		}
	default:
		last := out // the last position's row
		m.norm.RMSNormRows(last, last, m.eps)
		// s.logits is private (Logits and Snapshot copy it), so the last pass's buffer is reused.
		if cap(s.logbuf) < V {
			s.logbuf = make([]float32, V)
		}
		logits = s.logbuf[:V]
		if err := w.guard(func() error { quant.MatVecParallel(m.lmHead, logits, last, m.threads); return nil }); err != nil {
			return nil, fail(-1, err)
		}
	}
	// Nothing computed from weights that failed a read or shrank under their mapping is reported.
	if err := w.settle(); err != nil {
		s.logits = nil
		return nil, fail(-1, err)
	}
	if mode == logitsAll {
		s.logits = append([]float32(nil), logits[(T-1)*V:]...) // callers may write to their rows
	} else {
		s.logits = logits
	}
	s.pos += T
	return logits, nil
}
