package config

import "fmt"

// Tensor counts of the released layout (§3.3), per part of the model.
// They mirror what a binder looks up; a test checks them against every
// fixture checkpoint.
const (
	tensorsModel    = 5  // embed_tokens, lm_head, norm, output_attn_res_{norm,proj}
	tensorsResidual = 6  // input/post norms and the two Attention Residuals pairs
	tensorsKDA      = 14 // 8 projections, 3 convolutions, A_log, dt_bias, o_norm
	tensorsMLA      = 7  // q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, o (+ g_proj)
	tensorsDense    = 3  // gate, up, down
	tensorsMoE      = 4  // router gate and bias, latent down and up projections
	tensorsShared   = 3  // shared experts' gate, up, down
	tensorsExpert   = 6  // w1, w2, w3: weight_packed and weight_scale each
)

// MinTensors returns the number of tensors the released layout (§3.3)
// names for c: a checkpoint holding fewer cannot describe it. The count is
// computed in int64 arithmetic from the layer map, without allocating, so it
// is safe on any Config that passed Validate.
func (c *Config) MinTensors() int64 {
	n := int64(tensorsModel)
	if c.NumLayers <= 0 {
		return n
	}
	// MLA layers need fewer tensors than KDA layers, so counting every
	// in-range entry (repeats included, capped at the layer count) keeps the
	// result a lower bound without allocating a set.
	layers := int64(c.NumLayers)
	var mla int64
	for _, l := range c.FullAttn {
		if l >= 1 && l <= c.NumLayers {
			mla++
		}
	}
	mla = min(mla, layers)
	mlaEach := int64(tensorsMLA)
	if c.MLAOutGate {
		mlaEach++
	}
	n += layers*tensorsResidual + mla*mlaEach + (layers-mla)*tensorsKDA
	dense := int64(min(max(c.FirstDense, 0), c.NumLayers))
	moeEach := int64(tensorsMoE) + int64(max(c.NumExperts, 0))*tensorsExpert
	if c.LatentNorm {
		moeEach++
	}
	if c.NumShared > 0 && c.MoEInter > 0 {
		moeEach += tensorsShared
	}
	n += dense*tensorsDense + (layers-dense)*moeEach
	return n
}

// CheckAgainst refuses c when a checkpoint of tensorCount tensors cannot
// hold it: every layer and every routed expert the config declares must be
// backed by tensors that exist. Binders call it after opening the
// checkpoint and before allocating anything per layer or per expert, so a
// config declaring 2^18 experts over a 4 MB checkpoint fails at once
// instead of building a quarter of a million missing-tensor messages.
// The error wraps ErrTooFewTensors.
func (c *Config) CheckAgainst(tensorCount int) error {
	need := c.MinTensors()
	if int64(tensorCount) < need {
		return fmt.Errorf("%w: %d layers and %d routed experts need at least %d tensors, the checkpoint holds %d",
			ErrTooFewTensors, c.NumLayers, c.NumExperts, need, tensorCount)
	}
	return nil
}
