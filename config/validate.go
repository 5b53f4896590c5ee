package config

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Validate runs the structural checks of §2.5 on c and returns a
// *ConfigError listing every violation, or nil. Parse has already run it;
// call it on a Config built or modified in code.
func (c *Config) Validate() error {
	if v := c.violations(); len(v) > 0 {
		return &ConfigError{Violations: v}
	}
	return nil
}

func (c *Config) violations() []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }

	// Rule 1: sizes. Names are the file's keys so the message points at the line to fix.
	sizes := []struct {
		name string
		v    int
		min  int
	}{
		{"hidden_size", c.Hidden, 1},
		{"num_hidden_layers", c.NumLayers, 1},
		{"vocab_size", c.Vocab, 1},
		{"num_heads (kda_num_heads)", c.KDAHeads, 1},
		{"head_dim (kda_head_dim)", c.KDAHeadDim, 1},
		{"short_conv_kernel_size", c.ConvK, 1},
		{"num_attention_heads", c.MLAHeads, 1},
		{"q_lora_rank", c.QLoRA, 1},
		{"kv_lora_rank", c.KVLoRA, 1},
		{"qk_nope_head_dim", c.QKNope, 1},
		{"qk_rope_head_dim", c.QKRope, 0},
		{"v_head_dim", c.VHead, 1},
		{"num_experts", c.NumExperts, 1},
		{"num_shared_experts", c.NumShared, 0},
		{"routed_expert_hidden_size", c.Latent, 1},
		{"moe_intermediate_size", c.MoEInter, 1},
		{"attn_res_block_size", c.AttnResBlock, 1},
		{"intermediate_size", c.DenseInter, 0},
	}
	for _, s := range sizes {
		switch {
		case s.v < s.min:
			add("%s = %d, must be ≥ %d", s.name, s.v, s.min)
		case s.v > MaxDim:
			add("%s = %d exceeds the library limit %d", s.name, s.v, MaxDim)
		}
	}
	if c.NumLayers > MaxLayers {
		add("num_hidden_layers = %d exceeds the library limit %d", c.NumLayers, MaxLayers)
	}
	if c.NumExperts > MaxExperts {
		add("num_experts = %d exceeds the library limit %d", c.NumExperts, MaxExperts)
	}
	if c.FirstDense < 0 || c.FirstDense > c.NumLayers {
		add("first_k_dense_replace = %d is outside 0..%d (num_hidden_layers)", c.FirstDense, c.NumLayers)
	}
	if c.FirstDense > 0 && c.DenseInter < 1 {
		add("intermediate_size = %d, must be ≥ 1 when first_k_dense_replace = %d > 0", c.DenseInter, c.FirstDense)
	}

	// Rule 2: scalars.
	positive := []struct {
		name string
		v    float64
	}{
		{"rms_norm_eps", c.RMSEps},
		{"activation_situ_beta (situ_beta)", c.SiTUBeta},
		{"activation_situ_linear_beta (situ_linear_beta)", c.SiTULinearBeta},
		{"routed_scaling_factor", c.RoutedScale},
	}
	for _, p := range positive {
		if !(p.v > 0) || math.IsInf(p.v, 0) {
			add("%s = %v, must be finite and > 0", p.name, p.v)
		}
	}
	if !(c.GateLB < 0) || math.IsInf(c.GateLB, 0) {
		add("gate_lower_bound = %v, must be finite and < 0", c.GateLB)
	}

	// Rule 3: the one-based MLA layer list.
	if len(c.FullAttn) == 0 {
		add("full_attn_layers is empty: at least one Gated MLA layer is required")
	}
	first := make(map[int]int, len(c.FullAttn))
	for i, l := range c.FullAttn {
		if l < 1 || l > c.NumLayers {
			add("full_attn_layers[%d] = %d is outside 1..%d (entries are one-based layer numbers)", i, l, c.NumLayers)
			continue
		}
		if j, dup := first[l]; dup {
			add("full_attn_layers[%d] = %d repeats full_attn_layers[%d]", i, l, j)
			continue
		}
		first[l] = i
	}
	if len(c.FullAttn) > 0 && len(c.FullAttn) >= c.NumLayers {
		add("full_attn_layers has %d entries for %d layers: at least one layer must be KDA", len(c.FullAttn), c.NumLayers)
	}

	// Rule 4: kda_layers, when given, must be the complement exactly. The
	// comparison walks every layer, so it waits for a plausible layer count.
	if c.KDALayers != nil && c.NumLayers <= MaxLayers {
		if msg := c.checkKDALayers(first); msg != "" {
			add("%s", msg)
		}
	}

	// Rule 5: routing.
	if c.TopK < 1 {
		add("num_experts_per_token = %d, must be ≥ 1", c.TopK)
	} else {
		if c.TopK > c.NumExperts {
			add("num_experts_per_token = %d exceeds num_experts = %d", c.TopK, c.NumExperts)
		}
		if c.TopK > MaxTopK {
			add("num_experts_per_token = %d exceeds the library limit %d", c.TopK, MaxTopK)
		}
	}
	return out
}

// checkKDALayers compares KDALayers with {1..NumLayers} minus the valid
// FullAttn entries (mla), order irrelevant, and describes any difference.
func (c *Config) checkKDALayers(mla map[int]int) string {
	seen := make(map[int]bool, len(c.KDALayers))
	var outside, dups, both []int
	for _, l := range c.KDALayers {
		switch {
		case l < 1 || l > c.NumLayers:
			outside = append(outside, l)
		case seen[l]:
			dups = append(dups, l)
		default:
			seen[l] = true
			if _, isMLA := mla[l]; isMLA {
				both = append(both, l)
			}
		}
	}
	var missing []int
	if c.NumLayers <= MaxDim {
		for l := 1; l <= c.NumLayers; l++ {
			if _, isMLA := mla[l]; !isMLA && !seen[l] {
				missing = append(missing, l)
			}
		}
	}
	if len(outside)+len(dups)+len(both)+len(missing) == 0 {
		return ""
	}
	var parts []string
	list := func(what string, l []int) {
		if len(l) > 0 {
			sort.Ints(l)
			parts = append(parts, what+" "+intsString(l, 16))
		}
	}
	list("outside 1..num_hidden_layers:", outside)
	list("repeated:", dups)
	list("also in full_attn_layers:", both)
	list("missing:", missing)
	return fmt.Sprintf("kda_layers must be {1..%d} minus full_attn_layers: %s", c.NumLayers, strings.Join(parts, "; "))
}

// intsString formats up to max entries of l.
func intsString(l []int, max int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range l {
		if i == max {
			fmt.Fprintf(&b, " … %d more", len(l)-max)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, v)
	}
	b.WriteByte(']')
	return b.String()
}
