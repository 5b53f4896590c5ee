package config

import (
	"errors"
	"fmt"

	"github.com/k3-project/k3/internal/fileio/strictjson"
)

// valueType is the JSON type a field is read as (§2.3).
type valueType uint8

const (
	tInt valueType = iota
	tFloat
	tBool
	tIntList
)

// field describes where and how one Config field is read.
type field struct {
	// names are searched, in order, in text_config and the root, and in the
	// flat shape's root: primary spelling first, then the alias.
	names []string
	// kda marks the KDA group, searched in linear_attn_config first.
	kda bool
	// aNames, when set, replace names inside linear_attn_config: only there
	// are the bare num_heads/head_dim spellings read.
	aNames   []string
	typ      valueType
	required bool
	// ptr returns the destination in c: *int, *float64, *bool or *[]int.
	ptr func(c *Config) any
}

// fields is the table of §2.3 in file order.
var fields = []field{
	{names: []string{"hidden_size"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.Hidden }},
	{names: []string{"num_hidden_layers"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.NumLayers }},
	{names: []string{"vocab_size"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.Vocab }},
	{names: []string{"rms_norm_eps"}, typ: tFloat, required: true, ptr: func(c *Config) any { return &c.RMSEps }},
	{names: []string{"kda_num_heads"}, aNames: []string{"num_heads", "kda_num_heads"}, kda: true, typ: tInt, required: true, ptr: func(c *Config) any { return &c.KDAHeads }},
	{names: []string{"kda_head_dim"}, aNames: []string{"head_dim", "kda_head_dim"}, kda: true, typ: tInt, required: true, ptr: func(c *Config) any { return &c.KDAHeadDim }},
	{names: []string{"short_conv_kernel_size"}, kda: true, typ: tInt, required: true, ptr: func(c *Config) any { return &c.ConvK }},
	{names: []string{"gate_lower_bound"}, kda: true, typ: tFloat, required: true, ptr: func(c *Config) any { return &c.GateLB }},
	{names: []string{"full_attn_layers"}, kda: true, typ: tIntList, required: true, ptr: func(c *Config) any { return &c.FullAttn }},
	{names: []string{"kda_layers"}, kda: true, typ: tIntList, ptr: func(c *Config) any { return &c.KDALayers }},
	{names: []string{"num_attention_heads"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.MLAHeads }},
	{names: []string{"q_lora_rank"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.QLoRA }},
	{names: []string{"kv_lora_rank"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.KVLoRA }},
	{names: []string{"qk_nope_head_dim"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.QKNope }},
	{names: []string{"qk_rope_head_dim"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.QKRope }},
	{names: []string{"v_head_dim"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.VHead }},
	{names: []string{"mla_use_output_gate"}, typ: tBool, ptr: func(c *Config) any { return &c.MLAOutGate }},
	{names: []string{"num_experts"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.NumExperts }},
	{names: []string{"num_experts_per_token"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.TopK }},
	{names: []string{"num_shared_experts"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.NumShared }},
	{names: []string{"routed_expert_hidden_size"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.Latent }},
	{names: []string{"moe_intermediate_size"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.MoEInter }},
	{names: []string{"routed_scaling_factor"}, typ: tFloat, required: true, ptr: func(c *Config) any { return &c.RoutedScale }},
	{names: []string{"moe_renormalize"}, typ: tBool, ptr: func(c *Config) any { return &c.MoERenorm }},
	{names: []string{"latent_moe_use_norm"}, typ: tBool, ptr: func(c *Config) any { return &c.LatentNorm }},
	{names: []string{"first_k_dense_replace"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.FirstDense }},
	{names: []string{"intermediate_size"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.DenseInter }},
	{names: []string{"attn_res_block_size"}, typ: tInt, required: true, ptr: func(c *Config) any { return &c.AttnResBlock }},
	{names: []string{"activation_situ_beta", "situ_beta"}, typ: tFloat, required: true, ptr: func(c *Config) any { return &c.SiTUBeta }},
	{names: []string{"activation_situ_linear_beta", "situ_linear_beta"}, typ: tFloat, required: true, ptr: func(c *Config) any { return &c.SiTULinearBeta }},
}

// location is one object searched for fields, with the path prefix used in
// messages ("" for the root).
type location struct {
	obj    *strictjson.Value
	prefix string
	isA    bool
}

// layout holds the search orders of one document (§2.2).
type layout struct {
	nested bool
	kda    []location // KDA group
	other  []location // every other field
}

// read looks up every field of root. It returns the config read so far and
// the problems found; the config is only meaningful when there are none.
func read(root *strictjson.Value) (*Config, *ConfigError) {
	ce := &ConfigError{}
	c := &Config{}
	if root.Kind() != strictjson.Object {
		ce.Invalid = append(ce.Invalid, fmt.Sprintf("(root): %s where an object is expected", root.Kind()))
		return c, ce
	}
	lay := layout{other: []location{{obj: root}}, kda: []location{{obj: root}}}
	if t := root.Get("text_config"); t != nil {
		if t.Kind() != strictjson.Object {
			// Nothing can be looked up reliably: the fields' home is broken.
			ce.Invalid = append(ce.Invalid, fmt.Sprintf("text_config: %s where an object is expected", t.Kind()))
			return c, ce
		}
		lay.nested = true
		tLoc := location{obj: t, prefix: "text_config."}
		lay.other = []location{tLoc, {obj: root}}
		lay.kda = []location{tLoc, {obj: root}}
		if a := t.Get("linear_attn_config"); a != nil {
			if a.Kind() != strictjson.Object {
				ce.Invalid = append(ce.Invalid, fmt.Sprintf("text_config.linear_attn_config: %s where an object is expected", a.Kind()))
			} else {
				lay.kda = append([]location{{obj: a, prefix: "text_config.linear_attn_config.", isA: true}}, lay.kda...)
			}
		}
	}
	for i := range fields {
		f := &fields[i]
		locs := lay.other
		if f.kda {
			locs = lay.kda
		}
		v, path := find(f, locs)
		if v == nil {
			if f.required {
				ce.Missing = append(ce.Missing, missingName(f, lay.nested))
			} else if f.typ == tBool {
				*f.ptr(c).(*bool) = true
			}
			continue
		}
		if msg := assign(f.ptr(c), f.typ, v); msg != "" {
			ce.Invalid = append(ce.Invalid, path+msg)
		}
	}
	readRefused(lay.other, ce)
	readEOS(lay.other, c, ce)
	return c, ce
}

// find returns the value of the first listed name in the first location that
// holds one, and its path for messages.
func find(f *field, locs []location) (*strictjson.Value, string) {
	for _, l := range locs {
		names := f.names
		if l.isA && f.aNames != nil {
			names = f.aNames
		}
		for _, n := range names {
			if v := l.obj.Get(n); v != nil {
				return v, l.prefix + n
			}
		}
	}
	return nil, ""
}

// missingName names an absent field the way the file's shape spells it.
func missingName(f *field, nested bool) string {
	switch {
	case !nested:
		// Flat files use the alias spellings; the bare KDA names are never read there.
		return f.names[len(f.names)-1]
	case f.kda:
		n := f.names[0]
		if f.aNames != nil {
			n = f.aNames[0]
		}
		return "text_config.linear_attn_config." + n
	case len(f.names) > 1:
		return "text_config." + f.names[0] + " (or " + f.names[1] + ")"
	default:
		return "text_config." + f.names[0]
	}
}

// assign converts v to the field's type and stores it; it returns a problem
// description (prefixed by the caller with the path) or "".
func assign(dst any, typ valueType, v *strictjson.Value) string {
	switch typ {
	case tInt:
		n, msg := toInt(v)
		if msg != "" {
			return msg
		}
		*dst.(*int) = n
	case tFloat:
		if v.Kind() != strictjson.Number {
			return fmt.Sprintf(": %s where a number is expected", v.Kind())
		}
		x, err := v.Float64()
		if err != nil {
			t, _ := v.NumberText()
			return fmt.Sprintf(": %s is not a finite float64", t)
		}
		*dst.(*float64) = x
	case tBool:
		b, msg := toBool(v)
		if msg != "" {
			return msg
		}
		*dst.(*bool) = b
	case tIntList:
		l, msg := toIntList(v)
		if msg != "" {
			return msg
		}
		*dst.(*[]int) = l
	}
	return ""
}

// toInt reads an int: a JSON number with zero fraction that fits int64 (and
// the platform int); never truncated.
func toInt(v *strictjson.Value) (int, string) {
	if v.Kind() != strictjson.Number {
		return 0, fmt.Sprintf(": %s where an integer is expected", v.Kind())
	}
	n, err := v.Int()
	if err != nil {
		t, _ := v.NumberText()
		if isNotInteger(err) {
			return 0, fmt.Sprintf(": %s is not an integer", t)
		}
		return 0, fmt.Sprintf(": %s does not fit a 64-bit integer", t)
	}
	return n, ""
}

func toBool(v *strictjson.Value) (bool, string) {
	switch v.Kind() {
	case strictjson.Bool:
		b, _ := v.Bool()
		return b, ""
	case strictjson.Number:
		n, err := v.Int64()
		if err == nil && (n == 0 || n == 1) {
			return n == 1, ""
		}
		t, _ := v.NumberText()
		return false, fmt.Sprintf(": %s is not a boolean (true, false, 0 or 1)", t)
	}
	return false, fmt.Sprintf(": %s where a boolean is expected", v.Kind())
}

func toIntList(v *strictjson.Value) ([]int, string) {
	if v.Kind() != strictjson.Array {
		return nil, fmt.Sprintf(": %s where an array of integers is expected", v.Kind())
	}
	out := make([]int, 0, v.Len())
	for i, it := range v.Items() {
		n, msg := toInt(it)
		if msg != "" {
			// One message per field: a long broken list would drown the report.
			return nil, fmt.Sprintf("[%d]%s", i, msg)
		}
		out = append(out, n)
	}
	return out, ""
}

// readRefused refuses num_expert_group > 1: grouped routing is not part of K3
// and is not implemented (§2.3).
func readRefused(locs []location, ce *ConfigError) {
	f := &field{names: []string{"num_expert_group"}}
	v, path := find(f, locs)
	if v == nil {
		return
	}
	n, msg := toInt(v)
	if msg != "" {
		ce.Invalid = append(ce.Invalid, path+msg)
		return
	}
	if n > 1 {
		ce.Violations = append(ce.Violations, fmt.Sprintf("%s = %d: grouped expert routing is not part of K3 and is not implemented", path, n))
	}
}

// readEOS reads the informative eos_token_id: an int or a list of ints.
func readEOS(locs []location, c *Config, ce *ConfigError) {
	f := &field{names: []string{"eos_token_id"}}
	v, path := find(f, locs)
	if v == nil {
		return
	}
	if v.Kind() == strictjson.Array {
		l, msg := toIntList(v)
		if msg != "" {
			ce.Invalid = append(ce.Invalid, path+msg)
			return
		}
		c.EOSTokenIDs = l
		return
	}
	if v.Kind() != strictjson.Number {
		ce.Invalid = append(ce.Invalid, fmt.Sprintf("%s: %s where an integer or an array of integers is expected", path, v.Kind()))
		return
	}
	n, msg := toInt(v)
	if msg != "" {
		ce.Invalid = append(ce.Invalid, path+msg)
		return
	}
	c.EOSTokenIDs = []int{n}
}

func isNotInteger(err error) bool { return errors.Is(err, strictjson.ErrNotInteger) }
