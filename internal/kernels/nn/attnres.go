package nn

import "fmt"

// maxStackSources bounds the number of AttnRes sources handled without a
// heap allocation; more are allowed.
const maxStackSources = 16

// AttnRes is one Attention-Residuals aggregator (§4.4): a softmax over
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
// order: blocks in push order, then the partial sum). Evaluation (§5.3):
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
	// The keys four sources at a time, each score still its own sequential
	// chain (see sumSquares4). The last one to three sources run as four
	// too, the last of them repeated: the chains are latency-bound, so the
	// copies cost nothing, and their scores are dropped.
	for s := 0; s < len(sources); s += 4 {
		v0, v1, v2, v3 := sources[s], sources[min(s+1, len(sources)-1)], sources[min(s+2, len(sources)-1)], sources[min(s+3, len(sources)-1)]
		s0, s1, s2, s3 := sumSquares4(v0, v1, v2, v3)
		d := a.scores4(v0, v1, v2, v3, rmsScale(s0, e, a.eps), rmsScale(s1, e, a.eps), rmsScale(s2, e, a.eps), rmsScale(s3, e, a.eps))
		p = append(p, d[:min(4, len(sources)-s)]...)
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

// scores4 returns f32(Σ_i f64(x_i ⊗ r) · f64(fold_i)) for four sources x
// with their key scales r, each sum sequential in index order.
func (a *AttnRes) scores4(x0, x1, x2, x3 []float32, r0, r1, r2, r3 float32) [4]float32 {
	f := a.fold
	x0, x1, x2, x3 = x0[:len(f)], x1[:len(f)], x2[:len(f)], x3[:len(f)]
	var d0, d1, d2, d3 float64
	for i, w := range f {
		fw := float64(w)
		d0 += float64(x0[i]*r0) * fw
		d1 += float64(x1[i]*r1) * fw
		d2 += float64(x2[i]*r2) * fw
		d3 += float64(x3[i]*r3) * fw
	}
	return [4]float32{float32(d0), float32(d1), float32(d2), float32(d3)}
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
