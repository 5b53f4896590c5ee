package layout

import (
	"strconv"
	"strings"

	"github.com/k3-project/k3/config"
)

// Released names (§3.3). Every text-model tensor starts with TextPrefix; all but the output
// head continue with ModelPrefix, and a decoder layer's tensors with LayerPrefix(L).
const (
	TextPrefix   = "language_model."
	ModelPrefix  = TextPrefix + "model."
	LayersPrefix = ModelPrefix + "layers."

	EmbedName   = ModelPrefix + "embed_tokens.weight"
	HeadName    = TextPrefix + "lm_head.weight" // no ".model." segment
	NormName    = ModelPrefix + "norm.weight"
	OutNormName = ModelPrefix + "output_attn_res_norm.weight"
	OutProjName = ModelPrefix + "output_attn_res_proj.weight"

	// expertsSegment marks a routed expert's tensors (§3.4).
	expertsSegment = ".block_sparse_moe.experts."
)

// LayerPrefix returns the prefix of decoder layer l's tensors, "language_model.model.layers.{l}.".
func LayerPrefix(l int) string { return LayersPrefix + strconv.Itoa(l) + "." }

// ExpertPrefix returns the prefix of routed expert e of layer l, to which "w1.weight_packed"
// and the other five names of Expert are appended.
func ExpertPrefix(l, e int) string {
	return LayerPrefix(l) + "block_sparse_moe.experts." + strconv.Itoa(e) + "."
}

// LayerOf returns the decoder layer a tensor name belongs to. It reports false for a name
// outside LayersPrefix and for a layer number that is not written as §3.3 writes it (decimal,
// no sign, no leading zero).
func LayerOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, LayersPrefix)
	if !ok {
		return -1, false
	}
	num, _, ok := strings.Cut(rest, ".")
	// Nine digits bound the number far beyond any configuration and keep Atoi from overflowing.
	if !ok || num == "" || len(num) > 9 || num[0] == '0' && len(num) > 1 {
		return -1, false
	}
	l, err := strconv.Atoi(num)
	if err != nil || l < 0 {
		return -1, false
	}
	return l, true
}

// IsExpert reports whether name is one of a routed expert's tensors.
func IsExpert(name string) bool { return strings.Contains(name, expertsSegment) }

// ParseExpert splits a routed expert's tensor name into its layer, expert number and key (one of
// the six Keys of Expert, such as "w1.weight_packed"). It reports false for any other name, and
// for numbers not written as §3.3 writes them.
func ParseExpert(name string) (layer, expert int, key string, ok bool) {
	layer, ok = LayerOf(name)
	if !ok {
		return -1, -1, "", false
	}
	rest, found := strings.CutPrefix(name, LayerPrefix(layer)+"block_sparse_moe.experts.")
	if !found {
		return -1, -1, "", false
	}
	num, key, found := strings.Cut(rest, ".")
	if !found || num == "" || len(num) > 9 || num[0] == '0' && len(num) > 1 {
		return -1, -1, "", false
	}
	e, err := strconv.Atoi(num)
	if err != nil || e < 0 {
		return -1, -1, "", false
	}
	switch key {
	case "w1.weight_packed", "w1.weight_scale", "w2.weight_packed", "w2.weight_scale", "w3.weight_packed", "w3.weight_scale":
		return layer, e, key, true
	}
	return -1, -1, "", false
}

// Class is a tensor's class in §3.4's byte accounting.
type Class uint8

const (
	EmbedHead Class = iota // embedding, output head, final norm, output AttnRes pair
	Trunk                  // every per-layer tensor except routed experts
	Experts                // routed experts
	NumClasses
)

var classNames = [...]string{"embed_head", "trunk", "experts"}

// String returns the class's name as reports print it ("embed_head", "trunk", "experts").
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// Classify returns the class of a text-model tensor by its name; ok is false for names outside
// TextPrefix (the vision tower, the projector), which the model ignores.
func Classify(name string) (c Class, ok bool) {
	switch {
	case !strings.HasPrefix(name, TextPrefix):
		return 0, false
	case IsExpert(name):
		return Experts, true
	case strings.HasPrefix(name, LayersPrefix):
		return Trunk, true
	}
	return EmbedHead, true
}

// Kind says how a tensor is stored and read, and so which dtypes and shapes a reader accepts.
type Kind uint8

const (
	// Matrix is a [rows, cols] weight matrix, stored BF16, F16 or F32.
	Matrix Kind = iota
	// Vector is a small vector (BF16, F16, F32 or F64), read once at open: the model holds
	// RMSNorm gains at their stored width and the rest widened to float32.
	Vector
	// Conv is a depthwise convolution's taps, [P, 1, K] as released or [P, K].
	Conv
	// ALog is KDA's per-head log rate: [D] as released (entries H..D−1 are padding) or [H].
	ALog
	// Packed is an expert matrix's MXFP4 codes (U8 or I8), two per byte.
	Packed
	// Scale is an expert matrix's MXFP4 block scales (U8 or F8_E8M0), one per 32 columns.
	Scale
)

// Tensor is one row of the table.
type Tensor struct {
	Name  string
	Key   string // Name without its layer's or expert's prefix ("self_attn.q_proj.weight")
	Layer int    // decoder layer, or -1 for the model-level tensors
	Class Class
	Kind  Kind
	// Shape is the released shape; Alt, when set, another shape readers accept (§3.3).
	Shape, Alt []int
	// Rows and Cols are the logical matrix of a Matrix, Packed or Scale tensor.
	Rows, Cols int
	// Whole marks a matrix the layer reads by rows in its own order, which must stream as one
	// piece rather than in row ranges.
	Whole bool
}

// Model returns the model-level tensors: embedding and output head (the matrices, in the order
// a streamed trunk holds them), then the final norm and the output AttnRes pair.
func Model(c *config.Config) []Tensor {
	E, V := c.Hidden, c.Vocab
	t := func(name string, k Kind, shape ...int) Tensor {
		return Tensor{Name: name, Key: strings.TrimPrefix(name, TextPrefix), Layer: -1, Class: EmbedHead, Kind: k, Shape: shape}
	}
	emb, head := t(EmbedName, Matrix, V, E), t(HeadName, Matrix, V, E)
	emb.Rows, emb.Cols, head.Rows, head.Cols = V, E, V, E
	proj := t(OutProjName, Vector, 1, E)
	proj.Alt = []int{E}
	return []Tensor{emb, head, t(NormName, Vector, E), t(OutNormName, Vector, E), proj}
}

// Layer returns layer l's trunk tensors (everything but the routed experts) in the order the
// layer's forward pass first reads them: the residual wiring's vectors, the mixer (KDA or MLA),
// then the FFN (dense MLP, or the MoE's router, latent projections and fused shared experts).
// A streamed trunk reads the matrices in exactly this order, so it is an I/O contract with the
// layer math of packages attention and moe.
func Layer(c *config.Config, l int) []Tensor {
	var ts []Tensor
	lp := LayerPrefix(l)
	add := func(key string, k Kind, shape ...int) *Tensor {
		ts = append(ts, Tensor{Name: lp + key, Key: key, Layer: l, Class: Trunk, Kind: k, Shape: shape})
		return &ts[len(ts)-1]
	}
	mat := func(key string, rows, cols int) *Tensor {
		t := add(key, Matrix, rows, cols)
		t.Rows, t.Cols = rows, cols
		return t
	}
	row := func(key string, n int) { add(key, Vector, 1, n).Alt = []int{n} }
	E := c.Hidden
	add("input_layernorm.weight", Vector, E)
	add("post_attention_layernorm.weight", Vector, E)
	add("self_attention_res_norm.weight", Vector, E)
	row("self_attention_res_proj.weight", E)
	add("mlp_res_norm.weight", Vector, E)
	row("mlp_res_proj.weight", E)
	if c.IsMLA(l) {
		Hm, dq := c.MLAHeads, c.QKNope+c.QKRope
		mat("self_attn.q_a_proj.weight", c.QLoRA, E)
		add("self_attn.q_a_layernorm.weight", Vector, c.QLoRA)
		mat("self_attn.q_b_proj.weight", Hm*dq, c.QLoRA)
		mat("self_attn.kv_a_proj_with_mqa.weight", c.KVLoRA+c.QKRope, E)
		add("self_attn.kv_a_layernorm.weight", Vector, c.KVLoRA)
		// Every head reads kv_b_proj's rows, so it streams whole.
		mat("self_attn.kv_b_proj.weight", Hm*(c.QKNope+c.VHead), c.KVLoRA).Whole = true
		if c.MLAOutGate {
			mat("self_attn.g_proj.weight", Hm*c.VHead, E)
		}
		mat("self_attn.o_proj.weight", E, Hm*c.VHead)
	} else {
		H, D := c.KDAHeads, c.KDAHeadDim
		P := H * D
		mat("self_attn.q_proj.weight", P, E)
		mat("self_attn.k_proj.weight", P, E)
		mat("self_attn.v_proj.weight", P, E)
		mat("self_attn.g_proj.weight", P, E)
		mat("self_attn.f_a_proj.weight", D, E)
		mat("self_attn.f_b_proj.weight", P, D)
		mat("self_attn.b_proj.weight", H, E)
		mat("self_attn.o_proj.weight", E, P)
		for _, k := range []string{"q", "k", "v"} {
			add("self_attn."+k+"_conv1d.weight", Conv, P, 1, c.ConvK).Alt = []int{P, c.ConvK}
		}
		add("self_attn.A_log", ALog, D).Alt = []int{H}
		add("self_attn.dt_bias", Vector, P)
		add("self_attn.o_norm.weight", Vector, D)
	}
	if c.IsDense(l) {
		mat("mlp.gate_proj.weight", c.DenseInter, E)
		mat("mlp.up_proj.weight", c.DenseInter, E)
		mat("mlp.down_proj.weight", E, c.DenseInter)
		return ts
	}
	p := "block_sparse_moe."
	mat(p+"gate.weight", c.NumExperts, E)
	add(p+"gate.e_score_correction_bias", Vector, c.NumExperts)
	mat(p+"routed_expert_down_proj.weight", c.Latent, E)
	mat(p+"routed_expert_up_proj.weight", E, c.Latent)
	if c.LatentNorm {
		add(p+"routed_expert_norm.weight", Vector, c.Latent)
	}
	if SI := c.NumShared * c.MoEInter; SI > 0 {
		mat(p+"shared_experts.gate_proj.weight", SI, E)
		mat(p+"shared_experts.up_proj.weight", SI, E)
		mat(p+"shared_experts.down_proj.weight", E, SI)
	}
	return ts
}

// Expert returns the six tensors of routed expert e of MoE layer l in their stored order
// (w1 packed and scale, w2, w3): w1 (gate) and w3 (up) are logical [MoEInter, Latent], w2
// (down) [Latent, MoEInter].
func Expert(c *config.Config, l, e int) []Tensor {
	ep := ExpertPrefix(l, e)
	ts := make([]Tensor, 0, 6)
	for _, w := range []struct {
		n          string
		rows, cols int
	}{{"w1", c.MoEInter, c.Latent}, {"w2", c.Latent, c.MoEInter}, {"w3", c.MoEInter, c.Latent}} {
		ts = append(ts,
			Tensor{Name: ep + w.n + ".weight_packed", Key: w.n + ".weight_packed", Layer: l, Class: Experts, Kind: Packed,
				Shape: []int{w.rows, w.cols / 2}, Rows: w.rows, Cols: w.cols},
			Tensor{Name: ep + w.n + ".weight_scale", Key: w.n + ".weight_scale", Layer: l, Class: Experts, Kind: Scale,
				Shape: []int{w.rows, w.cols / 32}, Rows: w.rows, Cols: w.cols})
	}
	return ts
}

// ExpertBytes is one routed expert's checkpoint bytes: three MXFP4 matrices of
// MoEInter×Latent values, each half a byte per value plus one E8M0 scale byte per 32 values.
func ExpertBytes(c *config.Config) int64 {
	per := int64(c.MoEInter) * int64(c.Latent)
	return 3 * (per/2 + per/32)
}
