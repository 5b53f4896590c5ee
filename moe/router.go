package moe

import (
	"fmt"
	"math"

	"github.com/k3-project/k3/internal/kernels/fmath"
	"github.com/k3-project/k3/quant"
)

// renormEps is f32(1e−20), added to the router-weight sum (§5.1).
const renormEps float32 = 1e-20

// Router selects the top-k experts of one MoE layer (§4.8, all f32):
// logit_e = R16(W_gate[e], x) on the full-width input; score = σ(logit);
// choice = score ⊕ bias (selection only); top-k by repeated strict-> arg-max
// (lowest index on ties, NaN never picked); weights from the unbiased
// scores, renormalised if Renorm (den = f32(RS(w)) ⊕ f32(1e−20), also for
// k = 1), then ⊗ Scale.
type Router struct {
	gate   quant.Matrix
	bias   []float32
	k      int
	renorm bool
	scale  float32
}

// NewRouter binds a router. gate is [NE, E]; bias is the
// e_score_correction_bias [NE] (nil means zeros); scale is RoutedScale.
func NewRouter(gate quant.Matrix, bias []float32, topK int, renorm bool, scale float32) (*Router, error) {
	if gate == nil {
		return nil, fmt.Errorf("moe: router: gate matrix is missing")
	}
	ne := gate.Rows()
	if topK < 1 || topK > ne {
		return nil, fmt.Errorf("moe: router: top-k %d outside [1, %d]", topK, ne)
	}
	if bias == nil {
		bias = make([]float32, ne)
	}
	if len(bias) != ne {
		return nil, fmt.Errorf("moe: router: bias has %d entries, want %d experts", len(bias), ne)
	}
	return &Router{gate: gate, bias: bias, k: topK, renorm: renorm, scale: scale}, nil
}

// TopK returns k.
func (r *Router) TopK() int { return r.k }

// Experts returns the number of routed experts NE.
func (r *Router) Experts() int { return r.gate.Rows() }

// Route routes T positions x ([T][E]): ids[t·k+j] and w[t·k+j] receive the
// j-th pick of position t, in pick order (descending biased score).
func (r *Router) Route(ids []int, w []float32, x []float32, T, workers int) error {
	ne, e, k := r.gate.Rows(), r.gate.Cols(), r.k
	if len(x) != T*e || len(ids) != T*k || len(w) != T*k {
		return fmt.Errorf("moe: router: len(x)=%d len(ids)=%d len(w)=%d for T=%d E=%d k=%d", len(x), len(ids), len(w), T, e, k)
	}
	return r.route(ids, w, x, T, workers, make([]float32, T*ne), make([]float32, 2*ne))
}

// Predict picks len(ids) experts for one position x ([E]) the way routing
// orders them (descending biased score), for prefetching a layer's experts
// before its input exists. logits [NE] and sc [2·NE] are caller scratch, so a
// decode step allocates nothing.
func (r *Router) Predict(ids []int, x []float32, workers int, logits, sc []float32) error {
	ne, e := r.gate.Rows(), r.gate.Cols()
	if len(x) != e || len(ids) < 1 || len(ids) > ne || len(logits) != ne || len(sc) != 2*ne {
		return fmt.Errorf("moe: router: predict: len(x)=%d n=%d len(logits)=%d len(sc)=%d for E=%d NE=%d", len(x), len(ids), len(logits), len(sc), e, ne)
	}
	quant.MatVecParallel(r.gate, logits, x, workers)
	negInf := float32(math.Inf(-1))
	choice := sc[ne : 2*ne]
	for i, l := range logits {
		choice[i] = fmath.Sigmoid32(l) + r.bias[i]
	}
	for j := range ids {
		best, at := negInf, -1
		for i, c := range choice {
			if c > best {
				best, at = c, i
			}
		}
		if at < 0 {
			return fmt.Errorf("%w: only %d of %d predictions possible", ErrTooFewSelectable, j, len(ids))
		}
		ids[j], choice[at] = at, negInf
	}
	return nil
}

// Gate returns the router's gate matrix [NE, E].
func (r *Router) Gate() quant.Matrix { return r.gate }

// route is Route with caller scratch: logits [T·NE] and sc [2·NE]. Shapes
// are the caller's responsibility.
func (r *Router) route(ids []int, w []float32, x []float32, T, workers int, logits, sc []float32) error {
	ne, k := r.gate.Rows(), r.k
	quant.MatMulParallel(r.gate, logits, ne, x, T, workers)
	score, choice := sc[:ne], sc[ne:2*ne]
	for t := range T {
		for i, l := range logits[t*ne : (t+1)*ne] {
			score[i] = fmath.Sigmoid32(l)
			choice[i] = score[i] + r.bias[i]
		}
		if err := r.pick(ids[t*k:(t+1)*k], w[t*k:(t+1)*k], score, choice); err != nil {
			return fmt.Errorf("moe: router: position %d: %w", t, err)
		}
	}
	return nil
}

// pick does the top-k selection and weighting of one row; choice is
// consumed (picked entries become −∞).
func (r *Router) pick(ids []int, w, score, choice []float32) error {
	negInf := float32(math.Inf(-1))
	for j := range ids {
		best, at := negInf, -1
		for i, c := range choice {
			if c > best { // strict: ties keep the lowest index; NaN never compares greater
				best, at = c, i
			}
		}
		if at < 0 {
			return fmt.Errorf("%w: only %d of %d picks possible", ErrTooFewSelectable, j, len(ids))
		}
		ids[j] = at
		w[j] = score[at]
		choice[at] = negInf
	}
	if r.renorm {
		var sum float64
		for _, v := range w {
			sum += float64(v)
		}
		den := float32(sum) + renormEps
		for j := range w {
			w[j] = w[j] / den
		}
	}
	for j := range w {
		w[j] = w[j] * r.scale
	}
	return nil
}
