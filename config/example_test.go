package config_test

import (
	"errors"
	"fmt"

	"github.com/k3-project/k3/config"
)

func ExampleParse() {
	// A flat (fixture-shape) config for the 13-layer tiny model.
	data := []byte(`{
	  "hidden_size": 128, "num_hidden_layers": 13, "vocab_size": 256, "rms_norm_eps": 1e-05,
	  "kda_num_heads": 4, "kda_head_dim": 16, "short_conv_kernel_size": 4, "gate_lower_bound": -5.0,
	  "full_attn_layers": [4, 8, 12, 13],
	  "num_attention_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 24,
	  "qk_rope_head_dim": 8, "v_head_dim": 16,
	  "num_experts": 8, "num_experts_per_token": 2, "num_shared_experts": 2,
	  "routed_expert_hidden_size": 64, "moe_intermediate_size": 64, "routed_scaling_factor": 1.0,
	  "first_k_dense_replace": 1, "intermediate_size": 96, "attn_res_block_size": 3,
	  "situ_beta": 4.0, "situ_linear_beta": 25.0
	}`)
	c, err := config.Parse(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Summary())
	fmt.Println(c.LayerKinds())
	// Layer indices are zero-based; full_attn_layers is one-based.
	fmt.Println(c.IsMLA(3), c.IsKDA(0), c.IsDense(0), c.MLASlot(12), c.IsBoundary(9))
	// Output:
	// hidden=128 layers=13 vocab=256 | 4 MLA + 9 KDA | experts 8 top2 shared2 | latent=64
	// KKKMKKKMKKKMM
	// true true true 3 true
}

func ExampleConfigError() {
	// Everything wrong is reported at once; nothing is defaulted.
	_, err := config.Parse([]byte(`{"text_config": {"hidden_size": 7168.5, "vocab_size": 163840}}`))
	var ce *config.ConfigError
	if errors.As(err, &ce) {
		fmt.Println(len(ce.Missing), "missing, first:", ce.Missing[0])
		fmt.Println(ce.Invalid)
	}
	// Output:
	// 24 missing, first: text_config.num_hidden_layers
	// [text_config.hidden_size: 7168.5 is not an integer]
}

func ExampleK3() {
	c := config.K3()
	fmt.Println(c.Summary())
	fmt.Println(c.MLALayers()[22:], c.NumBlocks())
	// Output:
	// hidden=7168 layers=93 vocab=163840 | 24 MLA + 69 KDA | experts 896 top16 shared2 | latent=3584
	// [91 92] 8
}
