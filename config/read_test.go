package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/fileio/strictjson"
)

func TestParseBothShapes(t *testing.T) {
	if c := mustParse(t, tinyNested().render()); !reflect.DeepEqual(c, tinyWant()) {
		t.Errorf("nested:\n got %+v\nwant %+v", c, tinyWant())
	}
	want := tinyWant()
	want.KDALayers = nil
	if c := mustParse(t, tinyFlat().render()); !reflect.DeepEqual(c, want) {
		t.Errorf("flat:\n got %+v\nwant %+v", c, want)
	}
}

const (
	tc = "text_config."
	la = "text_config.linear_attn_config."
)

// TestLookupAndTypes covers the lookup order of §2.2 and the type rules
// of §2.3: each case edits the tiny nested or flat document and states the
// resulting value of one field, or the problem reported.
func TestLookupAndTypes(t *testing.T) {
	type edit struct{ path, raw string }
	cases := []struct {
		name  string
		flat  bool
		edits []edit
		// exactly one of: get (checked against want), or the expected report entry.
		get     func(*Config) any
		want    any
		missing string
		invalid []string // substrings of one Invalid entry
	}{
		// ints
		{name: "integral 128.0", edits: []edit{{tc + "hidden_size", "128.0"}}, get: func(c *Config) any { return c.Hidden }, want: 128},
		{name: "integral 1.28e2", edits: []edit{{tc + "hidden_size", "1.28e2"}}, get: func(c *Config) any { return c.Hidden }, want: 128},
		{name: "integral 12800e-2", edits: []edit{{tc + "hidden_size", "12800e-2"}}, get: func(c *Config) any { return c.Hidden }, want: 128},
		{name: "fractional int", edits: []edit{{tc + "hidden_size", "128.5"}}, invalid: []string{"text_config.hidden_size: 128.5 is not an integer"}},
		{name: "fractional tiny", edits: []edit{{tc + "vocab_size", "256.0000000000000001"}}, invalid: []string{"text_config.vocab_size: 256.0000000000000001 is not an integer"}},
		{name: "int overflow", edits: []edit{{tc + "hidden_size", "9223372036854775808"}}, invalid: []string{"text_config.hidden_size: 9223372036854775808 does not fit a 64-bit integer"}},
		{name: "int overflow exp", edits: []edit{{tc + "hidden_size", "1e400"}}, invalid: []string{"hidden_size: 1e400 does not fit"}},
		{name: "int as string", edits: []edit{{tc + "hidden_size", `"128"`}}, invalid: []string{"text_config.hidden_size: string where an integer is expected"}},
		{name: "int as null", edits: []edit{{tc + "hidden_size", `null`}}, invalid: []string{"text_config.hidden_size: null where an integer is expected"}},
		{name: "int as bool", edits: []edit{{tc + "q_lora_rank", `true`}}, invalid: []string{"text_config.q_lora_rank: boolean where an integer is expected"}},
		// floats
		{name: "float from int literal", edits: []edit{{tc + "routed_scaling_factor", "2"}}, get: func(c *Config) any { return c.RoutedScale }, want: 2.0},
		{name: "float as string", edits: []edit{{tc + "rms_norm_eps", `"1e-5"`}}, invalid: []string{"text_config.rms_norm_eps: string where a number is expected"}},
		{name: "float overflow", edits: []edit{{tc + "rms_norm_eps", `1e999`}}, invalid: []string{"text_config.rms_norm_eps: 1e999 is not a finite float64"}},
		{name: "float in A", edits: []edit{{la + "gate_lower_bound", `[-5]`}}, invalid: []string{la + "gate_lower_bound: array where a number is expected"}},
		// bools
		{name: "bool 0", edits: []edit{{tc + "mla_use_output_gate", "0"}}, get: func(c *Config) any { return c.MLAOutGate }, want: false},
		{name: "bool 1", edits: []edit{{tc + "moe_renormalize", "1"}}, get: func(c *Config) any { return c.MoERenorm }, want: true},
		{name: "bool 1.0", edits: []edit{{tc + "moe_renormalize", "1.0"}}, get: func(c *Config) any { return c.MoERenorm }, want: true},
		{name: "bool false", edits: []edit{{tc + "latent_moe_use_norm", "false"}}, get: func(c *Config) any { return c.LatentNorm }, want: false},
		{name: "bool default", edits: []edit{{tc + "latent_moe_use_norm", ""}}, get: func(c *Config) any { return c.LatentNorm }, want: true},
		{name: "bool default flat", flat: true, edits: []edit{{"mla_use_output_gate", ""}}, get: func(c *Config) any { return c.MLAOutGate }, want: true},
		{name: "bool 2", edits: []edit{{tc + "mla_use_output_gate", "2"}}, invalid: []string{"text_config.mla_use_output_gate: 2 is not a boolean"}},
		{name: "bool 0.5", edits: []edit{{tc + "mla_use_output_gate", "0.5"}}, invalid: []string{"mla_use_output_gate: 0.5 is not a boolean"}},
		{name: "bool string", edits: []edit{{tc + "mla_use_output_gate", `"true"`}}, invalid: []string{"text_config.mla_use_output_gate: string where a boolean is expected"}},
		{name: "bool null", edits: []edit{{tc + "moe_renormalize", `null`}}, invalid: []string{"moe_renormalize: null where a boolean is expected"}},
		// int lists
		{name: "list spellings", edits: []edit{{la + "full_attn_layers", "[4.0, 8, 1.2e1, 13]"}}, get: func(c *Config) any { return c.FullAttn }, want: []int{4, 8, 12, 13}},
		{name: "list not array", edits: []edit{{la + "full_attn_layers", "4"}}, invalid: []string{la + "full_attn_layers: number where an array of integers is expected"}},
		{name: "list fractional", edits: []edit{{la + "full_attn_layers", "[4, 8.5, 12, 13]"}}, invalid: []string{la + "full_attn_layers[1]: 8.5 is not an integer"}},
		{name: "list of strings", edits: []edit{{la + "kda_layers", `["1"]`}}, invalid: []string{la + "kda_layers[0]: string where an integer is expected"}},
		{name: "kda_layers optional", edits: []edit{{la + "kda_layers", ""}}, get: func(c *Config) any { return c.KDALayers }, want: []int(nil)},
		// lookup order: T before root, primary before alias, first location decides
		{name: "T before root", edits: []edit{{"hidden_size", "64"}}, get: func(c *Config) any { return c.Hidden }, want: 128},
		{name: "root fallback", edits: []edit{{tc + "vocab_size", ""}, {"vocab_size", "512"}}, get: func(c *Config) any { return c.Vocab }, want: 512},
		{name: "wrong type stops search", edits: []edit{{tc + "hidden_size", `"128"`}, {"hidden_size", "128"}}, invalid: []string{"text_config.hidden_size: string"}},
		{name: "alias in T", edits: []edit{{tc + "activation_situ_beta", ""}, {tc + "situ_beta", "3.5"}}, get: func(c *Config) any { return c.SiTUBeta }, want: 3.5},
		{name: "primary before alias", edits: []edit{{tc + "situ_beta", "3.5"}}, get: func(c *Config) any { return c.SiTUBeta }, want: 4.0},
		{name: "alias in T before primary at root", edits: []edit{{tc + "activation_situ_linear_beta", ""}, {tc + "situ_linear_beta", "20"}, {"activation_situ_linear_beta", "30"}}, get: func(c *Config) any { return c.SiTULinearBeta }, want: 20.0},
		{name: "bad primary shadows alias", edits: []edit{{tc + "activation_situ_beta", `"4"`}, {tc + "situ_beta", "4"}}, invalid: []string{"text_config.activation_situ_beta: string"}},
		{name: "betas missing", edits: []edit{{tc + "activation_situ_beta", ""}}, missing: "text_config.activation_situ_beta (or situ_beta)"},
		// KDA group: A, then T, then root
		{name: "A before T", edits: []edit{{tc + "kda_num_heads", "99"}}, get: func(c *Config) any { return c.KDAHeads }, want: 4},
		{name: "A alias", edits: []edit{{la + "num_heads", ""}, {la + "kda_num_heads", "4"}}, get: func(c *Config) any { return c.KDAHeads }, want: 4},
		{name: "A primary before alias", edits: []edit{{la + "kda_head_dim", "99"}}, get: func(c *Config) any { return c.KDAHeadDim }, want: 16},
		{name: "KDA in T", edits: []edit{{la + "short_conv_kernel_size", ""}, {tc + "short_conv_kernel_size", "3"}}, get: func(c *Config) any { return c.ConvK }, want: 3},
		{name: "KDA at root", edits: []edit{{la + "gate_lower_bound", ""}, {"gate_lower_bound", "-3"}}, get: func(c *Config) any { return c.GateLB }, want: -3.0},
		{name: "KDA kda_ spelling in T", edits: []edit{{la + "head_dim", ""}, {tc + "kda_head_dim", "16"}}, get: func(c *Config) any { return c.KDAHeadDim }, want: 16},
		{name: "bare head_dim in T ignored", edits: []edit{{la + "head_dim", ""}, {tc + "head_dim", "16"}}, missing: la + "head_dim"},
		{name: "bare num_heads at root ignored", edits: []edit{{la + "num_heads", ""}, {"num_heads", "4"}}, missing: la + "num_heads"},
		{name: "bad A value stops search", edits: []edit{{la + "num_heads", "4.5"}, {tc + "kda_num_heads", "4"}}, invalid: []string{la + "num_heads: 4.5 is not an integer"}},
		{name: "layer map in T", edits: []edit{{la + "full_attn_layers", ""}, {tc + "full_attn_layers", "[4, 8, 12, 13]"}}, get: func(c *Config) any { return c.FullAttn }, want: []int{4, 8, 12, 13}},
		{name: "no linear_attn_config", edits: []edit{{tc + "linear_attn_config", ""}, {tc + "kda_num_heads", "4"}, {tc + "kda_head_dim", "16"},
			{tc + "short_conv_kernel_size", "4"}, {tc + "gate_lower_bound", "-5"}, {"full_attn_layers", "[4, 8, 12, 13]"}}, get: func(c *Config) any { return c.KDAHeads }, want: 4},
		// flat shape: root only, aliases, bare KDA names never read
		{name: "flat betas primary", flat: true, edits: []edit{{"situ_beta", ""}, {"activation_situ_beta", "2"}}, get: func(c *Config) any { return c.SiTUBeta }, want: 2.0},
		{name: "flat bare num_heads", flat: true, edits: []edit{{"kda_num_heads", ""}, {"num_heads", "4"}}, missing: "kda_num_heads"},
		{name: "flat missing alias name", flat: true, edits: []edit{{"situ_linear_beta", ""}}, missing: "situ_linear_beta"},
		{name: "flat fractional", flat: true, edits: []edit{{"num_experts", "8.25"}}, invalid: []string{"num_experts: 8.25 is not an integer"}},
		// containers
		{name: "linear_attn_config not an object", edits: []edit{{tc + "linear_attn_config", "[1]"}}, invalid: []string{"text_config.linear_attn_config: array where an object is expected"}},
		// informative and refused keys
		{name: "eos int", edits: []edit{{tc + "eos_token_id", "163586"}}, get: func(c *Config) any { return c.EOSTokenIDs }, want: []int{163586}},
		{name: "eos list", edits: []edit{{tc + "eos_token_id", "[1, 2]"}}, get: func(c *Config) any { return c.EOSTokenIDs }, want: []int{1, 2}},
		{name: "eos root", edits: []edit{{"eos_token_id", "7"}}, get: func(c *Config) any { return c.EOSTokenIDs }, want: []int{7}},
		{name: "eos T before root", edits: []edit{{"eos_token_id", "7"}, {tc + "eos_token_id", "8"}}, get: func(c *Config) any { return c.EOSTokenIDs }, want: []int{8}},
		{name: "eos flat", flat: true, edits: []edit{{"eos_token_id", "[]"}}, get: func(c *Config) any { return c.EOSTokenIDs }, want: []int{}},
		{name: "eos string", edits: []edit{{tc + "eos_token_id", `"</s>"`}}, invalid: []string{"text_config.eos_token_id: string where an integer or an array of integers is expected"}},
		{name: "eos fractional", edits: []edit{{tc + "eos_token_id", `1.5`}}, invalid: []string{"text_config.eos_token_id: 1.5 is not an integer"}},
		{name: "eos list bad", edits: []edit{{tc + "eos_token_id", `[1, null]`}}, invalid: []string{"text_config.eos_token_id[1]: null"}},
		{name: "expert groups 1", edits: []edit{{tc + "num_expert_group", "1"}}, get: func(c *Config) any { return c.TopK }, want: 2},
		{name: "expert groups type", edits: []edit{{tc + "num_expert_group", `"1"`}}, invalid: []string{"text_config.num_expert_group: string"}},
		// unknown keys are ignored
		{name: "unknown keys", edits: []edit{{"vision_config", `{"hidden_size": "x"}`}, {tc + "rope_theta", `"x"`}, {tc + "tie_word_embeddings", `"x"`}}, get: func(c *Config) any { return c.Hidden }, want: 128},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := tinyNested()
			if c.flat {
				d = tinyFlat()
			}
			for _, e := range c.edits {
				d = d.with(e.path, e.raw)
			}
			cfg, err := Parse([]byte(d.render()))
			if c.get != nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if got := c.get(cfg); !reflect.DeepEqual(got, c.want) {
					t.Fatalf("got %#v, want %#v", got, c.want)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			ce := configError(t, err)
			if c.missing != "" && !reflect.DeepEqual(ce.Missing, []string{c.missing}) {
				t.Errorf("Missing = %q, want [%q] (report %v)", ce.Missing, c.missing, err)
			}
			if c.invalid != nil && !containsEntry(ce.Invalid, c.invalid...) {
				t.Errorf("Invalid = %q, want an entry with %q", ce.Invalid, c.invalid)
			}
		})
	}
}

func TestTextConfigNotObject(t *testing.T) {
	for _, raw := range []string{"[]", "1", `"x"`, "null", "true"} {
		_, err := Parse([]byte(tinyNested().with("text_config", raw).render()))
		ce := configError(t, err)
		if len(ce.Invalid) != 1 || !strings.HasPrefix(ce.Invalid[0], "text_config: ") || len(ce.Missing) != 0 {
			t.Errorf("text_config = %s: %+v", raw, ce)
		}
	}
	for _, raw := range []string{"[]", "1", `"x"`, "null"} {
		_, err := Parse([]byte(raw))
		ce := configError(t, err)
		if len(ce.Invalid) != 1 || !strings.HasPrefix(ce.Invalid[0], "(root): ") {
			t.Errorf("root %s: %+v", raw, ce)
		}
	}
}

// A broken linear_attn_config is reported, and its fields are then looked
// for in text_config and the root only.
func TestLinearAttnConfigNotObject(t *testing.T) {
	_, err := Parse([]byte(tinyNested().with(tc+"linear_attn_config", "7").render()))
	ce := configError(t, err)
	if !containsEntry(ce.Invalid, "text_config.linear_attn_config: number where an object is expected") {
		t.Errorf("Invalid = %q", ce.Invalid)
	}
	want := []string{la + "num_heads", la + "head_dim", la + "short_conv_kernel_size", la + "gate_lower_bound", la + "full_attn_layers"}
	if !reflect.DeepEqual(ce.Missing, want) {
		t.Errorf("Missing = %q", ce.Missing)
	}
}

func TestStrictJSON(t *testing.T) {
	cases := []struct {
		name, doc, inMsg string
		sentinel         error
	}{
		{"duplicate key", strings.Replace(tinyNested().render(), `"vocab_size":256`, `"vocab_size":256,"hidden_size":128`, 1),
			"text_config.hidden_size", strictjson.ErrDuplicateKey},
		{"duplicate in A", strings.Replace(tinyNested().render(), `"head_dim":16`, `"head_dim":16,"head_dim":16`, 1),
			"text_config.linear_attn_config.head_dim", strictjson.ErrDuplicateKey},
		{"duplicate in ignored object", tinyNested().with("vision_config", `{"a":1,"a":1}`).render(), "vision_config.a", strictjson.ErrDuplicateKey},
		{"NaN", tinyFlat().with("rms_norm_eps", "NaN").render(), "", strictjson.ErrSyntax},
		{"Infinity", tinyFlat().with("gate_lower_bound", "-Infinity").render(), "", strictjson.ErrSyntax},
		{"trailing comma", strings.TrimSuffix(tinyFlat().render(), "}") + ",}", "trailing comma", strictjson.ErrSyntax},
		{"leading zero", tinyFlat().with("hidden_size", "0128").render(), "leading zero", strictjson.ErrSyntax},
		{"invalid UTF-8", tinyFlat().with("note", "\"\xff\"").render(), "UTF-8", strictjson.ErrInvalidUTF8},
		{"lone surrogate", tinyFlat().with("note", `"\ud800"`).render(), "surrogate", strictjson.ErrLoneSurrogate},
		{"two values", tinyFlat().render() + "{}", "after the top-level value", strictjson.ErrSyntax},
		{"empty", "", "empty", strictjson.ErrSyntax},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc))
		if !errors.Is(err, ErrInvalidJSON) || !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.inMsg) {
			t.Errorf("%s: %v", c.name, err)
		}
		var se *strictjson.Error
		if !errors.As(err, &se) || se.Offset < 0 || se.Offset > int64(len(c.doc)) {
			t.Errorf("%s: no byte offset in %v", c.name, err)
		}
	}
}

// All missing and wrongly typed fields are reported together, in table order.
func TestAllProblemsTogether(t *testing.T) {
	d := tinyNested().
		with(tc+"hidden_size", "").
		with(tc+"vocab_size", `"256"`).
		with(la+"full_attn_layers", "").
		with(tc+"num_experts_per_token", "2.5").
		with(tc+"moe_renormalize", "3").
		with(tc+"activation_situ_linear_beta", "").
		with(tc+"num_expert_group", "4")
	_, err := Parse([]byte(d.render()))
	ce := configError(t, err)
	wantMissing := []string{"text_config.hidden_size", la + "full_attn_layers", "text_config.activation_situ_linear_beta (or situ_linear_beta)"}
	if !reflect.DeepEqual(ce.Missing, wantMissing) {
		t.Errorf("Missing = %q", ce.Missing)
	}
	wantInvalid := []string{
		"text_config.vocab_size: string where an integer is expected",
		"text_config.num_experts_per_token: 2.5 is not an integer",
		"text_config.moe_renormalize: 3 is not a boolean (true, false, 0 or 1)",
	}
	if !reflect.DeepEqual(ce.Invalid, wantInvalid) {
		t.Errorf("Invalid = %q", ce.Invalid)
	}
	if !containsEntry(ce.Violations, "text_config.num_expert_group = 4", "grouped") {
		t.Errorf("Violations = %q", ce.Violations)
	}
	msg := err.Error()
	for _, s := range append(append(wantMissing, wantInvalid...), "num_expert_group") {
		if !strings.Contains(msg, s) {
			t.Errorf("Error() lacks %q: %s", s, msg)
		}
	}

	// Structural violations are collected together too, after reading succeeds.
	d = tinyFlat().with("num_experts_per_token", "0").with("gate_lower_bound", "1").with("rms_norm_eps", "0").
		with("full_attn_layers", "[4, 4, 14]").with("num_expert_group", "2")
	_, err = Parse([]byte(d.render()))
	ce = configError(t, err)
	if len(ce.Missing)+len(ce.Invalid) != 0 || len(ce.Violations) != 6 {
		t.Errorf("violations: %q", ce.Violations)
	}
}
