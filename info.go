package k3

import "github.com/k3-project/k3/layout"

// ClassInfo counts the tensors of one class.
type ClassInfo struct {
	Tensors int   // checkpoint tensors bound (an MXFP4 matrix's packed and scale tensors count as two)
	Params  int64 // stored parameters (A_log's padding included, as in SPEC §3.5's resident set)
	Bytes   int64 // bytes in the checkpoint
}

// Info describes a bound model.
type Info struct {
	EmbedHead ClassInfo // embedding, lm_head, final norm, output AttnRes pair
	Trunk     ClassInfo // all per-layer tensors except routed experts
	Experts   ClassInfo // routed experts
	// Params and Bytes are the sums over the three classes.
	Params, Bytes int64
	// KDAStateBytes is the recurrent state plus conv tails one Session holds for all KDA layers.
	KDAStateBytes int64
	// MLACacheBytesPerPosition is what one Session's MLA caches grow by per processed position,
	// summed over the MLA layers (latent form: (kv_lora_rank + qk_rope_head_dim) float32 each).
	MLACacheBytesPerPosition int64
}

// Info returns parameter and byte counts and per-session state sizes.
func (m *Model) Info() Info { return m.info }

func (m *Model) computeInfo(b *binder) Info {
	var in Info
	in.EmbedHead, in.Trunk, in.Experts = b.counts[layout.EmbedHead], b.counts[layout.Trunk], b.counts[layout.Experts]
	for _, c := range b.counts {
		in.Params += c.Params
		in.Bytes += c.Bytes
	}
	// Sizes come from the states the layers actually allocate, not from the config.
	for l := range m.layers {
		if k := m.layers[l].kda; k != nil {
			st := k.NewState()
			in.KDAStateBytes += 4 * int64(len(st.S)+len(st.ConvQ)+len(st.ConvK)+len(st.ConvV))
		} else {
			c := m.layers[l].mla.NewCache()
			in.MLACacheBytesPerPosition += 4 * int64(c.KVLoRA+c.Rope)
		}
	}
	return in
}
