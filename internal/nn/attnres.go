package nn

import "fmt"

// maxStackSources bounds the number of AttnRes sources handled without a
// heap allocation; more are allowed.
const maxStackSources = 16

// AttnRes is one Attention-Residuals aggregator (SPEC §4.4): a softmax over
// sources weighted by the similarity of each RMS-normalised source with a
// learned pseudo-query, mixing the RAW sources.
//
// The norm gain and the pseudo-query collapse into one vector fold = norm ⊗
// proj, computed once at construction.
type AttnRes struct {
	fold []float32
	eps  float32
}

// NewAttnRes binds an aggregator from its key-norm gain and pseudo-query
// (both of the model width; the checkpoint's [1, E] projection is passed
// flat). eps is RMSEps.
func NewAttnRes(norm, proj []float32, eps float32) (*AttnRes, error) {
	if len(norm) == 0 || len(norm) != len(proj) {
		return nil, fmt.Errorf("nn: attnres: norm has %d elements, proj %d; want equal and non-zero", len(norm), len(proj))
	}
	fold := make([]float32, len(norm))
	for i := range fold {
		fold[i] = norm[i] * proj[i]
	}
	return &AttnRes{fold: fold, eps: eps}, nil
}

// Width returns the model width E the aggregator was built for.
func (a *AttnRes) Width() int { return len(a.fold) }

// Fold returns norm ⊗ proj (shared; do not modify).
func (a *AttnRes) Fold() []float32 { return a.fold }

// Apply sets dst (width E) to the aggregate of the sources (each width E, in
// order: blocks in push order, then the partial sum). Evaluation (SPEC §5.3):
//
//	r_s = RMSScale(v_s); key = v_s ⊗ r_s; score_s = f32(RS(f64(key_i)·f64(fold_i)))
//	p = Softmax(score); out_i: f32 accumulator from +0, out = out ⊕ (p_s ⊗ v_s,i)
//
// dst must not alias a source. It returns an error for no sources or a
// width mismatch.
func (a *AttnRes) Apply(dst []float32, sources [][]float32) error {
	e := len(a.fold)
	if len(sources) == 0 {
		return fmt.Errorf("nn: attnres: no sources")
	}
	if len(dst) != e {
		return fmt.Errorf("nn: attnres: dst has %d elements, want %d", len(dst), e)
	}
	for s, v := range sources {
		if len(v) != e {
			return fmt.Errorf("nn: attnres: source %d has %d elements, want %d", s, len(v), e)
		}
	}
	var buf [maxStackSources]float32
	p := buf[:0]
	if len(sources) > maxStackSources {
		p = make([]float32, 0, len(sources))
	}
	for _, v := range sources {
		r := RMSScale(v, a.eps)
		var d float64
		for i, x := range v {
			d += float64(x*r) * float64(a.fold[i])
		}
		p = append(p, float32(d))
	}
	Softmax(p, p)
	clear(dst)
	for s, v := range sources {
		ps := p[s]
		for i, x := range v {
			dst[i] = dst[i] + float32(ps*x)
		}
	}
	return nil
}

// applyRows is Apply over T positions: source s of position t is
// rows[s][t·E : (t+1)·E].
func (a *AttnRes) applyRows(dst []float32, rows [][]float32, t int, scratch [][]float32) error {
	e := len(a.fold)
	for s, r := range rows {
		scratch[s] = r[t*e : (t+1)*e]
	}
	return a.Apply(dst[t*e:(t+1)*e], scratch[:len(rows)])
}
