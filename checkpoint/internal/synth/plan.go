package synth

import (
	"math"
	"strconv"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/safetensors"
)

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

const prefix = "language_model.model."

func layerPrefix(l int) string { return prefix + "layers." + strconv.Itoa(l) + "." }

func mat(name string, rows, cols int, gain float64) spec {
	return spec{name: name, dtype: safetensors.BF16, shape: []int64{int64(rows), int64(cols)},
		kind: kindNormal, std: gain / math.Sqrt(float64(cols))}
}

func vec(name string, n int, k kind, std float64) spec {
	return spec{name: name, dtype: safetensors.F32, shape: []int64{int64(n)}, kind: k, std: std}
}

// Scales of the draws (standard deviation × sqrt(fan-in)); see the package comment.
const (
	gainProj   = 1.0  // projections feeding norms, attention, routing: unit-variance outputs
	gainGate   = 8.0  // SiTU gate inputs: |g| > β1 = 4 on about 60% of entries
	gainUp     = 12.0 // SiTU up inputs: tanh(u/25) visibly non-linear, saturating in the tails
	gainDown   = 0.05 // down projections after SiTU-GLU (|y| up to 100)
	gainLogits = 2.0  // lm_head: logits spread over a few units
	stdRouterB = 0.1  // correction bias: comparable to gaps between sigmoid scores
)

// plan lists every tensor of the checkpoint in layout order: the embedding, then per layer its
// trunk tensors sorted by name followed by its routed experts (w1, w2, w3; packed then scale),
// then lm_head and the model-level vectors, as in the released checkpoint and the fixtures.
//
// With released set, the small vectors the released checkpoint stores in BF16 (every norm gain and
// AttnRes pseudo-query) are BF16 here too, so byte counts match SPEC §3.5; otherwise they are F32
// like the fixtures'. KDA vectors, convolution taps and the router bias are F32 either way.
func plan(c *config.Config, released bool) []unit {
	E, P, D, H := c.Hidden, c.KDAHeads*c.KDAHeadDim, c.KDAHeadDim, c.KDAHeads
	small := safetensors.F32
	if released {
		small = safetensors.BF16
	}
	gain := func(name string, n int) spec {
		return spec{name: name, dtype: small, shape: []int64{int64(n)}, kind: kindGain, std: 0.1}
	}
	query := func(name string) spec {
		return spec{name: name, dtype: small, shape: []int64{1, int64(E)}, kind: kindNormal, std: 1 / math.Sqrt(float64(E))}
	}
	units := []unit{{{name: prefix + "embed_tokens.weight", dtype: safetensors.BF16,
		shape: []int64{int64(c.Vocab), int64(E)}, kind: kindNormal, std: 1}}}
	for l := 0; l < c.NumLayers; l++ {
		lp := layerPrefix(l)
		var tr unit
		add := func(s spec) { s.name = lp + s.name; tr = append(tr, s) }
		add(gain("input_layernorm.weight", E))
		add(gain("post_attention_layernorm.weight", E))
		add(gain("self_attention_res_norm.weight", E))
		add(query("self_attention_res_proj.weight"))
		add(gain("mlp_res_norm.weight", E))
		add(query("mlp_res_proj.weight"))
		if c.IsMLA(l) {
			Hm, dq := c.MLAHeads, c.QKNope+c.QKRope
			add(mat("self_attn.q_a_proj.weight", c.QLoRA, E, gainProj))
			add(gain("self_attn.q_a_layernorm.weight", c.QLoRA))
			add(mat("self_attn.q_b_proj.weight", Hm*dq, c.QLoRA, gainProj))
			add(mat("self_attn.kv_a_proj_with_mqa.weight", c.KVLoRA+c.QKRope, E, gainProj))
			add(gain("self_attn.kv_a_layernorm.weight", c.KVLoRA))
			add(mat("self_attn.kv_b_proj.weight", Hm*(c.QKNope+c.VHead), c.KVLoRA, gainProj))
			add(mat("self_attn.o_proj.weight", E, Hm*c.VHead, gainProj))
			if c.MLAOutGate {
				add(mat("self_attn.g_proj.weight", Hm*c.VHead, E, gainProj))
			}
		} else {
			conv := func(n string) spec {
				return spec{name: n, dtype: safetensors.F32, shape: []int64{int64(P), 1, int64(c.ConvK)}, kind: kindNormal, std: 0.4}
			}
			add(spec{name: "self_attn.A_log", dtype: safetensors.F32, shape: []int64{int64(D)}, kind: kindALog, heads: H})
			add(mat("self_attn.b_proj.weight", H, E, gainProj))
			add(vec("self_attn.dt_bias", P, kindNormal, 0.5))
			add(mat("self_attn.f_a_proj.weight", D, E, gainProj))
			add(mat("self_attn.f_b_proj.weight", P, D, gainProj))
			add(mat("self_attn.g_proj.weight", P, E, gainProj))
			add(conv("self_attn.k_conv1d.weight"))
			add(mat("self_attn.k_proj.weight", P, E, gainProj))
			add(vec("self_attn.o_norm.weight", D, kindGain, 0.1)) // F32 in the released checkpoint too
			add(mat("self_attn.o_proj.weight", E, P, gainProj))
			add(conv("self_attn.q_conv1d.weight"))
			add(mat("self_attn.q_proj.weight", P, E, gainProj))
			add(conv("self_attn.v_conv1d.weight"))
			add(mat("self_attn.v_proj.weight", P, E, gainProj))
		}
		if c.IsDense(l) {
			add(mat("mlp.down_proj.weight", E, c.DenseInter, gainDown))
			add(mat("mlp.gate_proj.weight", c.DenseInter, E, gainGate))
			add(mat("mlp.up_proj.weight", c.DenseInter, E, gainUp))
		} else {
			m := "block_sparse_moe."
			SI := c.NumShared * c.MoEInter
			add(vec(m+"gate.e_score_correction_bias", c.NumExperts, kindNormal, stdRouterB))
			add(mat(m+"gate.weight", c.NumExperts, E, gainProj))
			add(mat(m+"routed_expert_down_proj.weight", c.Latent, E, gainProj))
			if c.LatentNorm {
				add(gain(m+"routed_expert_norm.weight", c.Latent))
			}
			add(mat(m+"routed_expert_up_proj.weight", E, c.Latent, gainProj))
			if SI > 0 {
				add(mat(m+"shared_experts.down_proj.weight", E, SI, gainDown))
				add(mat(m+"shared_experts.gate_proj.weight", SI, E, gainGate))
				add(mat(m+"shared_experts.up_proj.weight", SI, E, gainUp))
			}
		}
		sortByName(tr)
		units = append(units, tr)
		if !c.IsDense(l) {
			for e := 0; e < c.NumExperts; e++ {
				units = append(units, expert(lp+"block_sparse_moe.experts."+strconv.Itoa(e)+".", c.MoEInter, c.Latent))
			}
		}
	}
	tail := unit{
		{name: "language_model.lm_head.weight", dtype: safetensors.BF16, shape: []int64{int64(c.Vocab), int64(E)},
			kind: kindNormal, std: gainLogits / math.Sqrt(float64(E))},
		gain(prefix+"norm.weight", E),
		gain(prefix+"output_attn_res_norm.weight", E),
		query(prefix + "output_attn_res_proj.weight"),
	}
	return append(units, tail)
}

// expert lists one routed expert's six tensors: w1 (gate) and w3 (up) map latent → inter,
// w2 (down) maps inter → latent.
func expert(p string, inter, latent int) unit {
	var u unit
	for _, w := range []struct {
		n          string
		rows, cols int
		g          float64
	}{{"w1", inter, latent, gainGate}, {"w2", latent, inter, gainDown}, {"w3", inter, latent, gainUp}} {
		u = append(u,
			spec{name: p + w.n + ".weight_packed", dtype: safetensors.U8, shape: []int64{int64(w.rows), int64(w.cols / 2)},
				kind: kindPacked, std: w.g / math.Sqrt(float64(w.cols)), rows: w.rows, cols: w.cols, scale: p + w.n + ".weight_scale"},
			spec{name: p + w.n + ".weight_scale", dtype: safetensors.U8, shape: []int64{int64(w.rows), int64(w.cols / 32)}, kind: kindScale})
	}
	return u
}

func sortByName(u unit) {
	for i := 1; i < len(u); i++ { // insertion sort: units are short and this keeps the import list small
		for j := i; j > 0 && u[j].name < u[j-1].name; j-- {
			u[j], u[j-1] = u[j-1], u[j]
		}
	}
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
