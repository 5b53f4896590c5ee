package k3

import "github.com/k3-project/k3/layout"

// ClassInfo counts the tensors of one class.
type ClassInfo struct {
	Tensors int   // checkpoint tensors bound (an MXFP4 matrix's packed and scale tensors count as two)
	Params  int64 // stored parameters (A_log's padding included, as in §3.5's resident set)
	Bytes   int64 // bytes in the checkpoint
}

// Info counts a bound model's tensors by class (§3.4). What one session holds is part of the
// memory plan (Plan.KDAStateBytes, Plan.MLABytesPerPosition).
type Info struct {
	EmbedHead ClassInfo // embedding, lm_head, final norm, output AttnRes pair
	Trunk     ClassInfo // all per-layer tensors except routed experts
	Experts   ClassInfo // routed experts
	// Params and Bytes are the sums over the three classes.
	Params, Bytes int64
}

// Info returns the model's parameter and byte counts.
func (m *Model) Info() Info { return m.info }

func (m *Model) computeInfo(b *binder) Info {
	in := Info{EmbedHead: b.counts[layout.EmbedHead], Trunk: b.counts[layout.Trunk], Experts: b.counts[layout.Experts]}
	for _, c := range b.counts {
		in.Params += c.Params
		in.Bytes += c.Bytes
	}
	return in
}
