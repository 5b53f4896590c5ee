package config

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestValidateRules has one case per rule of §2.5 (and the library
// limits): a change to the valid K3 config and the violation it must cause,
// or "" when the change is allowed.
func TestValidateRules(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name string
		edit func(c *Config)
		want string // substrings of the expected violations, one each, "|"-separated; "" = valid
	}{
		// rule 1
		{"hidden 0", func(c *Config) { c.Hidden = 0 }, "hidden_size = 0, must be ≥ 1"},
		{"layers 0", func(c *Config) { c.NumLayers, c.FirstDense, c.FullAttn, c.KDALayers = 0, 0, nil, nil }, "num_hidden_layers = 0, must be ≥ 1|full_attn_layers is empty"},
		{"vocab -1", func(c *Config) { c.Vocab = -1 }, "vocab_size = -1, must be ≥ 1"},
		{"kda heads 0", func(c *Config) { c.KDAHeads = 0 }, "num_heads (kda_num_heads) = 0"},
		{"kda head dim 0", func(c *Config) { c.KDAHeadDim = 0 }, "head_dim (kda_head_dim) = 0"},
		{"conv 0", func(c *Config) { c.ConvK = 0 }, "short_conv_kernel_size = 0"},
		{"mla heads 0", func(c *Config) { c.MLAHeads = 0 }, "num_attention_heads = 0"},
		{"q lora 0", func(c *Config) { c.QLoRA = 0 }, "q_lora_rank = 0"},
		{"kv lora 0", func(c *Config) { c.KVLoRA = 0 }, "kv_lora_rank = 0"},
		{"nope 0", func(c *Config) { c.QKNope = 0 }, "qk_nope_head_dim = 0"},
		{"rope 0 allowed", func(c *Config) { c.QKRope = 0 }, ""},
		{"rope -1", func(c *Config) { c.QKRope = -1 }, "qk_rope_head_dim = -1, must be ≥ 0"},
		{"v head 0", func(c *Config) { c.VHead = 0 }, "v_head_dim = 0"},
		{"experts 0", func(c *Config) { c.NumExperts, c.TopK = 0, 1 }, "num_experts = 0, must be ≥ 1|num_experts_per_token = 1 exceeds num_experts = 0"},
		{"shared 0 allowed", func(c *Config) { c.NumShared = 0 }, ""},
		{"shared -1", func(c *Config) { c.NumShared = -1 }, "num_shared_experts = -1, must be ≥ 0"},
		{"latent 0", func(c *Config) { c.Latent = 0 }, "routed_expert_hidden_size = 0"},
		{"moe inter 0", func(c *Config) { c.MoEInter = 0 }, "moe_intermediate_size = 0"},
		{"block 0", func(c *Config) { c.AttnResBlock = 0 }, "attn_res_block_size = 0"},
		{"block larger than model allowed", func(c *Config) { c.AttnResBlock = 1000 }, ""},
		{"first dense -1", func(c *Config) { c.FirstDense = -1 }, "first_k_dense_replace = -1 is outside 0..93"},
		{"first dense 94", func(c *Config) { c.FirstDense = 94 }, "first_k_dense_replace = 94 is outside 0..93"},
		{"first dense all layers allowed", func(c *Config) { c.FirstDense = 93 }, ""},
		{"dense inter 0 with dense layer", func(c *Config) { c.DenseInter = 0 }, "intermediate_size = 0, must be ≥ 1 when first_k_dense_replace = 1 > 0"},
		{"dense inter 0 without dense layer", func(c *Config) { c.DenseInter, c.FirstDense = 0, 0 }, ""},
		{"dense inter negative", func(c *Config) { c.DenseInter, c.FirstDense = -5, 0 }, "intermediate_size = -5, must be ≥ 0"},
		{"size over library limit", func(c *Config) { c.Vocab = MaxDim + 1 }, "vocab_size = 16777217 exceeds the library limit 16777216"},
		// rule 2
		{"eps 0", func(c *Config) { c.RMSEps = 0 }, "rms_norm_eps = 0, must be finite and > 0"},
		{"eps negative", func(c *Config) { c.RMSEps = -1e-5 }, "rms_norm_eps = -1e-05"},
		{"eps NaN", func(c *Config) { c.RMSEps = nan }, "rms_norm_eps = NaN"},
		{"eps Inf", func(c *Config) { c.RMSEps = inf }, "rms_norm_eps = +Inf"},
		{"gate lb 0", func(c *Config) { c.GateLB = 0 }, "gate_lower_bound = 0, must be finite and < 0"},
		{"gate lb positive", func(c *Config) { c.GateLB = 5 }, "gate_lower_bound = 5"},
		{"gate lb -Inf", func(c *Config) { c.GateLB = -inf }, "gate_lower_bound = -Inf"},
		{"gate lb NaN", func(c *Config) { c.GateLB = nan }, "gate_lower_bound = NaN"},
		{"beta 0", func(c *Config) { c.SiTUBeta = 0 }, "activation_situ_beta (situ_beta) = 0"},
		{"linear beta NaN", func(c *Config) { c.SiTULinearBeta = nan }, "activation_situ_linear_beta (situ_linear_beta) = NaN"},
		{"linear beta Inf", func(c *Config) { c.SiTULinearBeta = inf }, "activation_situ_linear_beta (situ_linear_beta) = +Inf"},
		{"routed scale negative", func(c *Config) { c.RoutedScale = -1 }, "routed_scaling_factor = -1"},
		{"routed scale 2.5 allowed", func(c *Config) { c.RoutedScale = 2.5 }, ""},
		// rule 3
		{"full attn nil", func(c *Config) { c.FullAttn, c.KDALayers = nil, nil }, "full_attn_layers is empty"},
		{"full attn empty", func(c *Config) { c.FullAttn, c.KDALayers = []int{}, nil }, "full_attn_layers is empty"},
		{"full attn zero-based 0", func(c *Config) { c.FullAttn[0], c.KDALayers = 0, nil }, "full_attn_layers[0] = 0 is outside 1..93"},
		{"full attn 94", func(c *Config) { c.FullAttn[23], c.KDALayers = 94, nil }, "full_attn_layers[23] = 94 is outside 1..93"},
		{"full attn duplicate", func(c *Config) { c.FullAttn[1], c.KDALayers = 4, nil }, "full_attn_layers[1] = 4 repeats full_attn_layers[0]"},
		{"full attn unordered allowed", func(c *Config) { c.FullAttn[0], c.FullAttn[23] = 93, 4 }, ""},
		{"all layers MLA", func(c *Config) {
			c.FullAttn, c.KDALayers = nil, nil
			for l := 1; l <= 93; l++ {
				c.FullAttn = append(c.FullAttn, l)
			}
		}, "full_attn_layers has 93 entries for 93 layers: at least one layer must be KDA"},
		// rule 4
		{"kda layers absent allowed", func(c *Config) { c.KDALayers = nil }, ""},
		{"kda layers reordered allowed", func(c *Config) { c.KDALayers[0], c.KDALayers[68] = c.KDALayers[68], c.KDALayers[0] }, ""},
		{"kda layers missing one", func(c *Config) { c.KDALayers = c.KDALayers[1:] }, "kda_layers must be {1..93} minus full_attn_layers: missing: [1]"},
		{"kda layers with an MLA layer", func(c *Config) { c.KDALayers = append(c.KDALayers, 4) }, "also in full_attn_layers: [4]"},
		{"kda layers out of range", func(c *Config) { c.KDALayers[0] = 0 }, "outside 1..num_hidden_layers: [0]; missing: [1]"},
		{"kda layers repeated", func(c *Config) { c.KDALayers = append(c.KDALayers, 2) }, "repeated: [2]"},
		{"kda layers empty", func(c *Config) { c.KDALayers = []int{} }, "missing: [1 2 3 5 6 7 9 10 11 13 14 15 17 18 19 21 … 53 more]"},
		// rule 5
		{"top k 0", func(c *Config) { c.TopK = 0 }, "num_experts_per_token = 0, must be ≥ 1"},
		{"top k > experts", func(c *Config) { c.NumExperts = 8 }, "num_experts_per_token = 16 exceeds num_experts = 8"},
		{"top k = experts allowed", func(c *Config) { c.TopK = 16; c.NumExperts = 16 }, ""},
		{"top k 64 allowed", func(c *Config) { c.TopK = 64 }, ""},
		{"top k 65", func(c *Config) { c.TopK = 65 }, "num_experts_per_token = 65 exceeds the library limit 64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := K3()
			tc.edit(c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			ce := configError(t, err)
			wants := strings.Split(tc.want, "|")
			if len(ce.Violations) != len(wants) || len(ce.Missing)+len(ce.Invalid) != 0 {
				t.Fatalf("Violations = %q, want %d containing %q", ce.Violations, len(wants), wants)
			}
			for i, w := range wants {
				if !strings.Contains(ce.Violations[i], w) {
					t.Errorf("Violations[%d] = %q, want it to contain %q", i, ce.Violations[i], w)
				}
			}
			// MarshalNested refuses what Validate refuses.
			if _, err := MarshalNested(c); err == nil {
				t.Error("MarshalNested wrote an invalid config")
			}
		})
	}
}

// The same rules apply to a file: Parse runs Validate.
func TestParseRunsValidate(t *testing.T) {
	cases := map[string]doc{
		"num_hidden_layers = 0":                         tinyFlat().with("num_hidden_layers", "0"),
		"full_attn_layers[0] = 0 is outside 1..13":      tinyFlat().with("full_attn_layers", "[0, 4, 8, 12]"),
		"kda_layers must be {1..13} minus":              tinyNested().with(la+"kda_layers", "[1, 2, 3]"),
		"num_experts_per_token = 9 exceeds num_experts": tinyFlat().with("num_experts_per_token", "9"),
		"gate_lower_bound = 0":                          tinyFlat().with("gate_lower_bound", "0.0"),
	}
	for want, d := range cases {
		_, err := Parse([]byte(d.render()))
		ce := configError(t, err)
		if !containsEntry(ce.Violations, want) {
			t.Errorf("%s: %q", want, ce.Violations)
		}
	}
}

func TestValidateK3AndTiny(t *testing.T) {
	if err := K3().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := tinyWant().Validate(); err != nil {
		t.Fatal(err)
	}
	// K3 returns fresh slices each time.
	a, b := K3(), K3()
	a.FullAttn[0] = 5
	if b.FullAttn[0] != 4 || !reflect.DeepEqual(K3(), b) {
		t.Fatal("K3 shares state between calls")
	}
}

func TestConfigErrorString(t *testing.T) {
	e := &ConfigError{Missing: []string{"a", "b"}, Violations: []string{"c = 1"}}
	if got := e.Error(); got != "config: invalid configuration; missing: a, b; violations: c = 1" {
		t.Errorf("Error() = %q", got)
	}
}
