package config

import (
	"errors"
	"strings"
	"testing"
)

// doc is an ordered JSON object used to build test configs; values are raw
// JSON text (string) or nested docs.
type doc []kv

type kv struct {
	k string
	v any
}

func (d doc) render() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + m.k + `":`)
		switch v := m.v.(type) {
		case doc:
			b.WriteString(v.render())
		case string:
			b.WriteString(v)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// with returns a copy of d with path (dot separated) set to raw JSON, or
// deleted when raw is "". A missing key is appended.
func (d doc) with(path, raw string) doc {
	key, rest, nested := strings.Cut(path, ".")
	out := make(doc, 0, len(d)+1)
	found := false
	for _, m := range d {
		if m.k != key {
			out = append(out, m)
			continue
		}
		found = true
		switch {
		case nested:
			out = append(out, kv{key, m.v.(doc).with(rest, raw)})
		case raw != "":
			out = append(out, kv{key, raw})
		}
	}
	if !found && raw != "" {
		if nested {
			out = append(out, kv{key, doc{}.with(rest, raw)})
		} else {
			out = append(out, kv{key, raw})
		}
	}
	return out
}

// tinyFlat is the tiny geometry in the flat shape (§1.5 tiny column),
// written out by hand.
func tinyFlat() doc {
	return doc{
		{"hidden_size", "128"}, {"num_hidden_layers", "13"}, {"vocab_size", "256"}, {"rms_norm_eps", "1e-05"},
		{"kda_num_heads", "4"}, {"kda_head_dim", "16"}, {"short_conv_kernel_size", "4"}, {"gate_lower_bound", "-5.0"},
		{"full_attn_layers", "[4, 8, 12, 13]"},
		{"num_attention_heads", "4"}, {"q_lora_rank", "64"}, {"kv_lora_rank", "32"}, {"qk_nope_head_dim", "24"},
		{"qk_rope_head_dim", "8"}, {"v_head_dim", "16"}, {"mla_use_output_gate", "true"},
		{"num_experts", "8"}, {"num_experts_per_token", "2"}, {"num_shared_experts", "2"},
		{"routed_expert_hidden_size", "64"}, {"moe_intermediate_size", "64"}, {"routed_scaling_factor", "1.0"},
		{"moe_renormalize", "true"}, {"latent_moe_use_norm", "true"}, {"first_k_dense_replace", "1"},
		{"intermediate_size", "96"}, {"attn_res_block_size", "3"}, {"situ_beta", "4.0"}, {"situ_linear_beta", "25.0"},
	}
}

// tinyNested is the same geometry in the released nested shape.
func tinyNested() doc {
	a := doc{
		{"num_heads", "4"}, {"head_dim", "16"}, {"short_conv_kernel_size", "4"}, {"gate_lower_bound", "-5.0"},
		{"full_attn_layers", "[4, 8, 12, 13]"}, {"kda_layers", "[1, 2, 3, 5, 6, 7, 9, 10, 11]"},
	}
	t := doc{
		{"hidden_size", "128"}, {"num_hidden_layers", "13"}, {"vocab_size", "256"}, {"rms_norm_eps", "1e-05"},
		{"num_attention_heads", "4"}, {"q_lora_rank", "64"}, {"kv_lora_rank", "32"}, {"qk_nope_head_dim", "24"},
		{"qk_rope_head_dim", "8"}, {"v_head_dim", "16"}, {"mla_use_output_gate", "true"},
		{"num_experts", "8"}, {"num_experts_per_token", "2"}, {"num_shared_experts", "2"},
		{"routed_expert_hidden_size", "64"}, {"moe_intermediate_size", "64"}, {"routed_scaling_factor", "1.0"},
		{"moe_renormalize", "true"}, {"latent_moe_use_norm", "true"}, {"first_k_dense_replace", "1"},
		{"intermediate_size", "96"}, {"attn_res_block_size", "3"},
		{"linear_attn_config", a},
		{"activation_situ_beta", "4.0"}, {"activation_situ_linear_beta", "25.0"},
	}
	return doc{{"architectures", `["KimiK3ForConditionalGeneration"]`}, {"model_type", `"kimi_k3"`}, {"text_config", t}}
}

// tinyWant is the expected Config of the tiny geometry (§1.5 / §2.3).
func tinyWant() *Config {
	return &Config{
		Hidden: 128, NumLayers: 13, Vocab: 256, RMSEps: 1e-5,
		KDAHeads: 4, KDAHeadDim: 16, ConvK: 4, GateLB: -5,
		FullAttn: []int{4, 8, 12, 13}, KDALayers: []int{1, 2, 3, 5, 6, 7, 9, 10, 11},
		MLAHeads: 4, QLoRA: 64, KVLoRA: 32, QKNope: 24, QKRope: 8, VHead: 16, MLAOutGate: true,
		NumExperts: 8, TopK: 2, NumShared: 2, Latent: 64, MoEInter: 64, RoutedScale: 1,
		MoERenorm: true, LatentNorm: true, FirstDense: 1, DenseInter: 96, AttnResBlock: 3,
		SiTUBeta: 4, SiTULinearBeta: 25,
	}
}

func mustParse(t *testing.T, s string) *Config {
	t.Helper()
	c, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, s)
	}
	return c
}

func configError(t *testing.T, err error) *ConfigError {
	t.Helper()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
	}
	return ce
}

// containsEntry reports whether one of list contains every substring in subs.
func containsEntry(list []string, subs ...string) bool {
	for _, e := range list {
		ok := true
		for _, s := range subs {
			if !strings.Contains(e, s) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
