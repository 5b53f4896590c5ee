package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/k3-project/k3/internal/fileio/regular"
	"github.com/k3-project/k3/internal/fileio/strictjson"
)

// MaxFileSize is the largest config.json accepted. §2.4 allows up to
// 256 MiB; the library refuses far less, because a released config is a few
// kilobytes and every byte of JSON may become a parsed value: a 157 MB file
// of list entries cost 2.8 GB before this limit. 1 MiB still holds a layer
// list for MaxLayers layers hundreds of times over.
const MaxFileSize = 1 << 20

// MaxDim is the library's limit on every size in the configuration (widths,
// counts, the number of layers). It keeps products of tensor dimensions far
// from int64 overflow; K3's largest size is the vocabulary, 163,840.
const MaxDim = 1 << 24

// MaxLayers and MaxExperts bound num_hidden_layers and num_experts by what
// is plausible (K3: 93 layers, 896 experts). Both are multiplied into
// per-layer and per-expert allocations by every binder, so a config that
// declares 2^24 layers must fail here, in microseconds, rather than in the
// allocator. CheckAgainst bounds them again by the checkpoint at hand.
const (
	MaxLayers  = 1 << 12
	MaxExperts = 1 << 16
)

// MaxTopK is the library's limit on experts per token: routing uses
// fixed-size buffers (§2.5 rule 5).
const MaxTopK = 64

// Config is the model configuration (§2.3). Sizes are plain ints; the
// one-based layer lists are kept exactly as written in the file. The comments
// give the JSON keys (nested spelling / flat alias where they differ).
type Config struct {
	// hidden_size (E), num_hidden_layers (NL), vocab_size (V), rms_norm_eps.
	Hidden, NumLayers, Vocab int
	RMSEps                   float64

	// Kimi Delta Attention: linear_attn_config.num_heads / kda_num_heads (H),
	// head_dim / kda_head_dim (D), short_conv_kernel_size (K),
	// gate_lower_bound (negative).
	KDAHeads, KDAHeadDim, ConvK int
	GateLB                      float64
	// FullAttn is full_attn_layers: the Gated MLA layers, ONE-based, in file order.
	FullAttn []int
	// KDALayers is the file's kda_layers (one-based), nil when absent. When
	// present it has been checked to be the complement of FullAttn.
	KDALayers []int

	// Gated MLA: num_attention_heads, q_lora_rank, kv_lora_rank,
	// qk_nope_head_dim, qk_rope_head_dim, v_head_dim, mla_use_output_gate
	// (default true).
	MLAHeads, QLoRA, KVLoRA, QKNope, QKRope, VHead int
	MLAOutGate                                     bool

	// LatentMoE: num_experts, num_experts_per_token, num_shared_experts,
	// routed_expert_hidden_size (latent width), moe_intermediate_size,
	// routed_scaling_factor, moe_renormalize and latent_moe_use_norm (both
	// default true).
	NumExperts, TopK, NumShared, Latent, MoEInter int
	RoutedScale                                   float64
	MoERenorm, LatentNorm                         bool

	// first_k_dense_replace (layers < FirstDense use the dense FFN),
	// intermediate_size (dense FFN width), attn_res_block_size,
	// activation_situ_beta / situ_beta, activation_situ_linear_beta /
	// situ_linear_beta.
	FirstDense, DenseInter, AttnResBlock int
	SiTUBeta, SiTULinearBeta             float64

	// EOSTokenIDs is the file's eos_token_id (an int or a list of ints), nil
	// when absent. Informative only: generation does not depend on it.
	EOSTokenIDs []int
}

// ConfigError lists every problem found in a configuration. Missing and
// Invalid come from reading the file (absent required fields; values of the
// wrong type or not representable); Violations from the structural checks
// of §2.5 and from refused features.
type ConfigError struct {
	Missing    []string
	Invalid    []string
	Violations []string
}

// Error lists every problem on one line.
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("config: invalid configuration")
	part := func(name string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "; %s: %s", name, strings.Join(items, ", "))
	}
	part("missing", e.Missing)
	part("invalid", e.Invalid)
	part("violations", e.Violations)
	return b.String()
}

func (e *ConfigError) empty() bool {
	return len(e.Missing) == 0 && len(e.Invalid) == 0 && len(e.Violations) == 0
}

// Sentinel errors for failures before any field is read.
var (
	// ErrInvalidJSON: the file is not strict JSON (the wrapped
	// strictjson error gives the byte offset and key path).
	ErrInvalidJSON = errors.New("config: not strict JSON")
	// ErrTooLarge: the file exceeds MaxFileSize.
	ErrTooLarge = errors.New("config: file larger than 1 MiB")
	// ErrTooFewTensors: the checkpoint holds fewer tensors than the
	// configuration needs (CheckAgainst), so it cannot describe it.
	ErrTooFewTensors = errors.New("config: checkpoint holds fewer tensors than the configuration needs")
)

// Load reads and parses the config file at path. A path that is not a
// regular file (a FIFO would block forever) is refused with an error
// wrapping regular.ErrNotRegular.
func Load(path string) (*Config, error) {
	data, err := regular.ReadFile(path, MaxFileSize)
	if errors.Is(err, regular.ErrTooLarge) {
		return nil, fmt.Errorf("config: %w: %w", ErrTooLarge, err)
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse parses and validates a config.json document. A *ConfigError (test
// with errors.As) lists every missing, wrongly typed and inconsistent field;
// malformed JSON is reported as ErrInvalidJSON wrapping the parser's error.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, len(data))
	}
	root, err := strictjson.ParseLimits(data, strictjson.Limits{MaxBytes: MaxFileSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	c, ce := read(root)
	// Structural checks only make sense once every field has a value; until
	// then report what reading found.
	if len(ce.Missing) == 0 && len(ce.Invalid) == 0 {
		ce.Violations = append(ce.Violations, c.violations()...)
	}
	if !ce.empty() {
		return nil, ce
	}
	return c, nil
}

// Clone returns a deep copy of c.
func (c *Config) Clone() *Config {
	d := *c
	d.FullAttn = cloneInts(c.FullAttn)
	d.KDALayers = cloneInts(c.KDALayers)
	d.EOSTokenIDs = cloneInts(c.EOSTokenIDs)
	return &d
}

func cloneInts(s []int) []int {
	if s == nil {
		return nil
	}
	return append(make([]int, 0, len(s)), s...)
}
