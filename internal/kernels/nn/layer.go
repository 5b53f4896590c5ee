package nn

import (
	"fmt"

	"github.com/k3-project/k3/internal/kernels/parallel"
)

// Mixer is a token mixer or feed-forward block applied to T positions: it
// reads x ([T][E], already RMS-normalised) and writes dst ([T][E]). dst and x
// never alias. Attention mixers close over their per-sequence state. The
// caller reads no row of dst before from, so a mixer may leave those rows
// unwritten; one with state must still take every position into it.
type Mixer func(dst, x []float32, T, from int) error

// Stream is the residual stream of T positions between decoder layers (
// §4.3): H is the running partial sum P of the current block ([T][E]) and
// Blocks the snapshots pushed at block boundaries, in push order (each
// [T][E]). Blocks[0] is always the token embedding once layer 0 has run.
// The stream carries nothing across calls: incremental decoding starts a new
// Stream per call.
type Stream struct {
	T, E   int
	H      []float32
	Blocks [][]float32
}

// NewStream starts a stream from the embeddings h ([T][E]); it takes
// ownership of h.
func NewStream(h []float32, T, E int) (*Stream, error) {
	if T <= 0 || E <= 0 || len(h) != T*E {
		return nil, fmt.Errorf("nn: stream: len(h)=%d, want T·E = %d·%d", len(h), T, E)
	}
	return &Stream{T: T, E: E, H: h}, nil
}

// Reset restarts s from the embeddings h ([T][E]) as NewStream would, keeping the capacity of
// its block list so that a stream reused pass after pass does not allocate.
func (s *Stream) Reset(h []float32, T, E int) error {
	if T <= 0 || E <= 0 || len(h) != T*E {
		return fmt.Errorf("nn: stream: len(h)=%d, want T·E = %d·%d", len(h), T, E)
	}
	s.Drop()
	s.T, s.E, s.H = T, E, h
	return nil
}

// Drop lets go of the stream's buffers, keeping its block list's capacity for Reset, so that a
// stream kept between passes does not hold a long prefill's memory.
func (s *Stream) Drop() {
	clear(s.Blocks)
	*s = Stream{Blocks: s.Blocks[:0]}
}

// Aggregate applies agg over Blocks ++ [H] at every position into dst
// ([T][E]); the model's output aggregation (§4.2 step 4).
func (s *Stream) Aggregate(dst []float32, agg *AttnRes, workers int) error {
	return s.AggregateWith(dst, agg, workers, nil)
}

// AggregateWith is Aggregate using the caller's scratch (nil: allocate).
func (s *Stream) AggregateWith(dst []float32, agg *AttnRes, workers int, ws *Workspace) error {
	return s.AggregateFrom(dst, agg, 0, workers, ws)
}

// AggregateFrom is AggregateWith for positions [from, T) only, into dst of
// (T−from)·E elements.
func (s *Stream) AggregateFrom(dst []float32, agg *AttnRes, from, workers int, ws *Workspace) error {
	if agg.Width() != s.E {
		return fmt.Errorf("nn: stream: aggregator width %d, stream width %d", agg.Width(), s.E)
	}
	if from < 0 || from > s.T || len(dst) != (s.T-from)*s.E {
		return fmt.Errorf("nn: stream: dst has %d elements for positions %d.. of %d, want %d", len(dst), from, s.T, (s.T-from)*s.E)
	}
	if ws == nil {
		ws = new(Workspace)
	}
	err := aggregate(dst, agg, rowsFrom(ws.sources(s.Blocks, s.H), from*s.E), s.T-from, workers, ws)
	clear(ws.rows)
	return err
}

// Workspace holds the scratch memory of Residual.ForwardWith and
// Stream.AggregateWith, so that the residual wiring of a decode step
// allocates nothing beyond the new partial sum a block-boundary layer
// starts (that buffer becomes part of the Stream). Buffers grow on demand.
//
// A Workspace is not safe for concurrent use: give each goroutine (for
// example each session) its own. It may be shared by every layer of a
// forward pass and reused across passes: nothing it hands out outlives the
// call that took it.
type Workspace struct {
	x, a, f       []float32
	rows, scratch [][]float32
	blocks        [][]float32 // partial sums by block index, reused pass after pass
}

// MaxReused is the largest buffer, in elements, a Workspace keeps from one pass to the next:
// decode and short verify passes reuse theirs, while a long prefill's go to the collector, so a
// session does not hold prefill-sized memory for its lifetime.
const MaxReused = 1 << 16

// block returns a zeroed buffer of n elements for the partial sum of block i. A stream's blocks
// have distinct indices, and the previous pass's stream is dead when the next one starts.
func (w *Workspace) block(i, n int) []float32 {
	if n > MaxReused {
		return make([]float32, n)
	}
	for len(w.blocks) <= i {
		w.blocks = append(w.blocks, nil)
	}
	b := grow(&w.blocks[i], n)
	clear(b)
	return b
}

// NewWorkspace returns an empty workspace.
func NewWorkspace() *Workspace { return new(Workspace) }

func grow(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	return (*buf)[:n]
}

// sources returns blocks ++ [last] in a reused slice.
func (w *Workspace) sources(blocks [][]float32, last []float32) [][]float32 {
	w.rows = append(append(w.rows[:0], blocks...), last)
	return w.rows
}

// aggregate sets dst[t] = agg(rows[0][t], …, rows[S−1][t]) for every
// position t, split over up to workers goroutines.
func aggregate(dst []float32, agg *AttnRes, rows [][]float32, T, workers int, ws *Workspace) error {
	if parallel.Chunks(T, workers, 1) > 1 {
		return forRows(T, workers, len(rows), func(t int, scratch [][]float32) error {
			return agg.applyRows(dst, rows, t, scratch)
		})
	}
	if cap(ws.scratch) < len(rows) {
		ws.scratch = make([][]float32, len(rows))
	}
	scratch := ws.scratch[:len(rows)]
	for t := range T {
		if err := agg.applyRows(dst, rows, t, scratch); err != nil {
			return err
		}
	}
	clear(scratch) // hold no references to the stream between calls
	return nil
}

// forRows runs fn for every position on up to workers goroutines; each
// goroutine gets its own scratch of n source slots. The first error wins.
func forRows(T, workers, n int, fn func(t int, scratch [][]float32) error) error {
	errs := make([]error, T)
	parallel.For(T, workers, 1, func(lo, hi int) {
		scratch := make([][]float32, n)
		for t := lo; t < hi; t++ {
			errs[t] = fn(t, scratch)
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Residual is the block-Attention-Residual wiring of one decoder layer
// (§4.3): the two pre-norms, the two aggregators and whether the layer
// starts a block (L mod b == 0).
type Residual struct {
	InputNorm Vec      // input_layernorm gain [E]
	PostNorm  Vec      // post_attention_layernorm gain [E]
	AttnRes   *AttnRes // self_attention_res_{norm,proj}
	MLPRes    *AttnRes // mlp_res_{norm,proj}
	Eps       float32  // RMSEps
	Boundary  bool     // layer index mod AttnResBlock == 0
}

// Validate checks that every part is present and of width e.
func (r *Residual) Validate(e int) error {
	switch {
	case r.InputNorm.Len() != e:
		return fmt.Errorf("nn: residual: input norm has %d elements, want %d", r.InputNorm.Len(), e)
	case r.PostNorm.Len() != e:
		return fmt.Errorf("nn: residual: post-attention norm has %d elements, want %d", r.PostNorm.Len(), e)
	case r.AttnRes == nil || r.AttnRes.Width() != e:
		return fmt.Errorf("nn: residual: missing or mis-sized pre-attention AttnRes (want width %d)", e)
	case r.MLPRes == nil || r.MLPRes.Width() != e:
		return fmt.Errorf("nn: residual: missing or mis-sized pre-FFN AttnRes (want width %d)", e)
	}
	return nil
}

// Forward runs one decoder layer on the stream:
//
//	P ← h; x ← h
//	if len(B) > 0: x ← AttnRes(B ++ [P])
//	if boundary:   B ← B ++ [P]; P ← NONE
//	a ← attn(RMSNorm(x; InputNorm))
//	P ← a if NONE else P ⊕ a
//	y ← AttnRes(B ++ [P]);  f ← ffn(RMSNorm(y; PostNorm));  P ← P ⊕ f;  h ← P
//
// workers bounds the goroutines used for the per-position aggregations and
// norms (results do not depend on it). The mixers receive zeroed dst
// buffers.
func (r *Residual) Forward(s *Stream, attn, ffn Mixer, workers int) error {
	return r.ForwardWith(s, attn, ffn, workers, nil)
}

// ForwardWith is Forward using the caller's scratch memory (nil: allocate).
// The buffers passed to attn and ffn belong to ws and are only valid during
// those calls. The partial sums a boundary layer starts (up to MaxReused
// elements) also live in ws: the stream's blocks stay valid until another
// stream passes through ws.
func (r *Residual) ForwardWith(s *Stream, attn, ffn Mixer, workers int, ws *Workspace) error {
	return r.ForwardFrom(s, attn, ffn, workers, ws, 0)
}

// ForwardFrom is ForwardWith with the FFN half (its aggregation, norm, ffn
// and add) run only for positions [from, T); attn still sees every position
// and is passed from. Rows before from are left unspecified, so it is for
// the last layer of a pass whose earlier rows nobody reads: the attention
// state every position leaves for later passes is the same as ForwardWith's,
// and so is every bit of rows [from, T).
func (r *Residual) ForwardFrom(s *Stream, attn, ffn Mixer, workers int, ws *Workspace, from int) error {
	T, E := s.T, s.E
	if from < 0 || from >= T {
		return fmt.Errorf("nn: residual: FFN rows from %d of %d", from, T)
	}
	if err := r.Validate(E); err != nil {
		return err
	}
	n := T * E
	if len(s.H) != n {
		return fmt.Errorf("nn: residual: stream H has %d elements, want %d", len(s.H), n)
	}
	if ws == nil {
		ws = new(Workspace)
	}
	x := grow(&ws.x, n)
	if len(s.Blocks) > 0 {
		if err := aggregate(x, r.AttnRes, ws.sources(s.Blocks, s.H), T, workers, ws); err != nil {
			return fmt.Errorf("nn: residual: pre-attention aggregation: %w", err)
		}
	} else {
		copy(x, s.H)
	}
	p := s.H
	var a []float32
	if r.Boundary {
		s.Blocks = append(s.Blocks, s.H)
		p = nil
		a = ws.block(len(s.Blocks), n) // becomes the new partial sum, owned by the stream for the pass
	} else {
		a = grow(&ws.a, n)
		clear(a)
	}
	normRows(x, x, r.InputNorm, r.Eps, T, workers)
	if err := attn(a, x, T, from); err != nil {
		return err
	}
	if p == nil {
		p = a
	} else {
		Add(p, p, a)
	}
	y := x[from*E:] // x is dead; reuse it for the aggregate
	if err := aggregate(y, r.MLPRes, rowsFrom(ws.sources(s.Blocks, p), from*E), T-from, workers, ws); err != nil {
		return fmt.Errorf("nn: residual: pre-FFN aggregation: %w", err)
	}
	clear(ws.rows) // hold no references to the stream between calls
	normRows(y, y, r.PostNorm, r.Eps, T-from, workers)
	f := grow(&ws.f, n-from*E)
	clear(f)
	if err := ffn(f, y, T-from, 0); err != nil {
		return err
	}
	Add(p[from*E:], p[from*E:], f)
	s.H = p
	return nil
}

// rowsFrom cuts every source to its elements from off on, in place.
func rowsFrom(rows [][]float32, off int) [][]float32 {
	if off > 0 {
		for i, r := range rows {
			rows[i] = r[off:]
		}
	}
	return rows
}

func normRows(dst, x []float32, w Vec, eps float32, T, workers int) {
	e := w.Len()
	if parallel.Chunks(T, workers, 1) <= 1 {
		w.RMSNormRows(dst, x, eps)
		return
	}
	parallel.For(T, workers, 1, func(lo, hi int) {
		w.RMSNormRows(dst[lo*e:hi*e], x[lo*e:hi*e], eps)
	})
}
