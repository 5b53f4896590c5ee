package checkpoint

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/safetensors"
)

// A synthetic checkpoint takes its tensors (names, shapes, which ones exist for a configuration)
// from package layout's table; what synthesis adds is how each one's values are drawn and in
// which dtype they are stored.
//
// Scales are chosen so that the model is not degenerate: SiTU-GLU gate and up projections are
// large enough for both tanh caps to saturate on part of the inputs, the router correction bias is
// large enough to change expert selections, AttnRes pseudo-queries give non-uniform mixtures, and
// logits have a spread of a few units so that greedy decoding has clear winners.

// kind says how a tensor's values are drawn.
type kind uint8

const (
	kindNormal kind = iota // approximately normal, mean 0, standard deviation std
	kindGain               // 1 + std·normal (norm gains)
	kindALog               // per-head log rates in the first H entries, zero padding after
	kindPacked             // MXFP4 codes of an expert matrix (drawn with std, quantised)
	kindScale              // MXFP4 scales: written together with the preceding kindPacked
)

// spec is one tensor of the plan.
type spec struct {
	name  string
	key   string // layout.Tensor.Key
	dtype safetensors.DType
	shape []int64
	kind  kind
	std   float64
	heads int // kindALog: meaningful entries
	// kindPacked: logical [rows, cols] of the matrix and the name of its scale tensor.
	rows, cols int
	scale      string
}

func (s *spec) bytes() int64 {
	n := int64(s.dtype.Bits()) / 8
	for _, d := range s.shape {
		n *= d
	}
	return n
}

// unit is a run of tensors that must share a shard (a layer's trunk, one expert).
type unit []spec

// Scales of the draws (standard deviation × sqrt(fan-in)).
const (
	gainProj   = 1.0  // projections feeding norms, attention, routing: unit-variance outputs
	gainGate   = 8.0  // SiTU gate inputs: |g| > β1 = 4 on about 60% of entries
	gainUp     = 12.0 // SiTU up inputs: tanh(u/25) visibly non-linear, saturating in the tails
	gainDown   = 0.05 // down projections after SiTU-GLU (|y| up to 100)
	gainLogits = 2.0  // lm_head: logits spread over a few units
	stdRouterB = 0.1  // correction bias: comparable to gaps between sigmoid scores
	stdGain    = 0.1  // norm gains: 1 ± 0.1
)

// synthPlan lists every tensor of the checkpoint in the released checkpoint's (and the
// fixtures') order: the embedding, then per layer its trunk tensors sorted by name followed by
// its routed experts (w1, w2, w3; packed then scale), then lm_head and the model-level vectors.
//
// With released set, the small vectors the released checkpoint stores in BF16 (every norm gain and
// AttnRes pseudo-query) are BF16 here too, so byte counts match §3.5; otherwise they are F32
// like the fixtures'. KDA vectors, convolution taps and the router bias are F32 either way.
func synthPlan(c *config.Config, released bool) ([]unit, error) {
	d := drawRules{c: c, small: safetensors.F32}
	if released {
		d.small = safetensors.BF16
	}
	var head, tail unit
	for _, t := range layout.Model(c) {
		s, err := d.spec(t)
		if err != nil {
			return nil, err
		}
		if t.Name == layout.EmbedName {
			head = append(head, s)
		} else {
			tail = append(tail, s)
		}
	}
	units := []unit{head}
	for l := range c.NumLayers {
		var tr unit
		for _, t := range layout.Layer(c, l) {
			s, err := d.spec(t)
			if err != nil {
				return nil, err
			}
			tr = append(tr, s)
		}
		sortByName(tr)
		units = append(units, tr)
		if !c.IsDense(l) {
			for e := range c.NumExperts {
				units = append(units, expertUnit(layout.Expert(c, l, e)))
			}
		}
	}
	return append(units, tail), nil
}

// drawRules chooses the dtype and the draw of each tensor of the table.
type drawRules struct {
	c     *config.Config
	small safetensors.DType // norm gains and AttnRes pseudo-queries
}

func (d drawRules) spec(t layout.Tensor) (spec, error) {
	s := spec{name: t.Name, key: t.Key, shape: make([]int64, len(t.Shape)), kind: kindNormal}
	for i, n := range t.Shape {
		s.shape[i] = int64(n)
	}
	switch t.Kind {
	case layout.Matrix:
		s.dtype = safetensors.BF16
		s.std = matrixGain(t) / math.Sqrt(float64(t.Cols))
		if t.Name == layout.EmbedName {
			s.std = 1 // embedding rows are the residual stream's input: unit variance as they are
		}
	case layout.Conv:
		s.dtype, s.std = safetensors.F32, 0.4
	case layout.ALog:
		s.dtype, s.kind, s.heads = safetensors.F32, kindALog, d.c.KDAHeads
	case layout.Vector:
		switch {
		case t.Key == "self_attn.o_norm.weight": // KDA's output norm is F32 in the released checkpoint too
			s.dtype, s.kind, s.std = safetensors.F32, kindGain, stdGain
		case strings.HasSuffix(t.Key, "norm.weight"):
			s.dtype, s.kind, s.std = d.small, kindGain, stdGain
		case strings.HasSuffix(t.Key, "res_proj.weight"): // AttnRes pseudo-queries
			s.dtype, s.std = d.small, 1/math.Sqrt(float64(d.c.Hidden))
		case t.Key == "self_attn.dt_bias":
			s.dtype, s.std = safetensors.F32, 0.5
		case t.Key == "block_sparse_moe.gate.e_score_correction_bias":
			s.dtype, s.std = safetensors.F32, stdRouterB
		default:
			return spec{}, fmt.Errorf("%s: no draw for this vector", t.Name)
		}
	default:
		return spec{}, fmt.Errorf("%s: no draw for a tensor of kind %d", t.Name, t.Kind)
	}
	return s, nil
}

// matrixGain is a dense matrix's gain: SiTU-GLU inputs are large enough to reach the tanh caps,
// the projections after it small, lm_head spreads logits, the rest keep unit variance.
func matrixGain(t layout.Tensor) float64 {
	if t.Name == layout.HeadName {
		return gainLogits
	}
	switch t.Key {
	case "mlp.gate_proj.weight", "block_sparse_moe.shared_experts.gate_proj.weight":
		return gainGate
	case "mlp.up_proj.weight", "block_sparse_moe.shared_experts.up_proj.weight":
		return gainUp
	case "mlp.down_proj.weight", "block_sparse_moe.shared_experts.down_proj.weight":
		return gainDown
	}
	return gainProj
}

// expertUnit lists one routed expert's six tensors (layout.Expert: each matrix's packed codes,
// then its scales): w1 (gate) and w3 (up) map latent → inter, w2 (down) maps inter → latent.
func expertUnit(ts []layout.Tensor) unit {
	u := make(unit, 0, len(ts))
	for i := 0; i+1 < len(ts); i += 2 {
		p, sc := ts[i], ts[i+1]
		g := gainGate
		switch {
		case strings.HasPrefix(p.Key, "w2."):
			g = gainDown
		case strings.HasPrefix(p.Key, "w3."):
			g = gainUp
		}
		u = append(u,
			spec{name: p.Name, key: p.Key, dtype: safetensors.U8, shape: []int64{int64(p.Shape[0]), int64(p.Shape[1])},
				kind: kindPacked, std: g / math.Sqrt(float64(p.Cols)), rows: p.Rows, cols: p.Cols, scale: sc.Name},
			spec{name: sc.Name, key: sc.Key, dtype: safetensors.U8, shape: []int64{int64(sc.Shape[0]), int64(sc.Shape[1])}, kind: kindScale})
	}
	return u
}

// sortByName puts a layer's trunk tensors in the order the released shards store them.
func sortByName(u unit) {
	slices.SortFunc(u, func(a, b spec) int { return strings.Compare(a.name, b.name) })
}

// shardUnits assigns units to n shards by the byte offset at which each starts, so shards hold
// about equal byte counts and no unit is split.
func shardUnits(units []unit, n int) [][]spec {
	var total int64
	for _, u := range units {
		for i := range u {
			total += u[i].bytes()
		}
	}
	shards := make([][]spec, n)
	var off int64
	for _, u := range units {
		s := int(float64(off) / float64(total) * float64(n))
		s = min(max(s, 0), n-1)
		shards[s] = append(shards[s], u...)
		for i := range u {
			off += u[i].bytes()
		}
	}
	return shards
}
