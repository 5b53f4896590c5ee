package k3

import (
	"fmt"
	"strings"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/trunk"
)

// Plan is a model's memory plan, itemised by component. PlanFor computes it without loading
// anything; Model.Plan returns the one a model runs under.
type Plan struct {
	// Mapped: no trunk budget; every shard is memory-mapped and the page cache holds what is
	// touched.
	Mapped bool `json:"mapped"`
	// Trunk is the dense-weight plan under a budget (nil when Mapped).
	Trunk *trunk.Plan `json:"trunk,omitempty"`
	// Packed is the packed trunk directory, if any.
	Packed string `json:"packed_trunk,omitempty"`
	// Cache is the routed-expert cache (nil: experts are memory-mapped).
	Cache *cache.Plan `json:"cache,omitempty"`
	// DenseBytes are the checkpoint bytes of every dense matrix (layers, embedding, head).
	DenseBytes int64 `json:"dense_bytes"`
	// KDAStateBytes is the recurrent state and conv tails one session keeps (all KDA layers).
	KDAStateBytes int64 `json:"kda_state_bytes_per_session"`
	// MLABytesPerPosition is what one session's MLA latent caches grow by per position.
	MLABytesPerPosition int64 `json:"mla_cache_bytes_per_position"`
	// WalkRows bounds the rows one shared walk carries (§4.11): concurrent forwards beyond
	// it wait for the next walk.
	WalkRows int `json:"walk_rows"`
	// WalkRowBytes estimates the activation memory one row of a walk needs: the residual
	// stream and its block snapshots, the widest layer's scratch (the expert union's
	// included), the kernels' widened inputs and the row's logits. A walk of N rows needs
	// about N times this.
	WalkRowBytes int64 `json:"walk_row_bytes"`
}

func (p *Plan) fillSession(c *config.Config, layers int) {
	p.KDAStateBytes, p.MLABytesPerPosition = 0, 0
	p.WalkRows, p.WalkRowBytes = maxWalkRows, walkRowBytes(c, layers)
	for l := range layers {
		if c.IsMLA(l) {
			p.MLABytesPerPosition += 4 * int64(c.KVLoRA+c.QKRope)
			continue
		}
		P := int64(c.KDAHeads * c.KDAHeadDim)
		p.KDAStateBytes += 4 * (int64(c.KDAHeads)*int64(c.KDAHeadDim)*int64(c.KDAHeadDim) + 3*P*int64(c.ConvK-1))
	}
}

// walkRowBytes is Plan.WalkRowBytes: what each row of a walk adds to the scratch the layers
// take (attention and moe workspaces, nn's residual wiring, the kernels' widened inputs),
// counted in the buffers they size by rows.
func walkRowBytes(c *config.Config, layers int) int64 {
	E := int64(c.Hidden)
	blocks := int64(1)
	if c.AttnResBlock > 0 {
		blocks += int64((layers + c.AttnResBlock - 1) / c.AttnResBlock)
	}
	stream := E * (blocks + 1 + 3 + 1) // blocks, partial sum, the wiring's x, a, f, the output row
	P, D, H := int64(c.KDAHeads*c.KDAHeadDim), int64(c.KDAHeadDim), int64(c.KDAHeads)
	kda := 6*P + D + H
	hm, dq, dv, kw := int64(c.MLAHeads), int64(c.QKNope+c.QKRope), int64(c.VHead), int64(c.KVLoRA+c.QKRope)
	mla := int64(c.QLoRA) + hm*dq + 2*hm*dv + kw
	k, ne, l, ni := int64(c.TopK), int64(c.NumExperts), int64(c.Latent), int64(c.MoEInter)
	// Router scores, picks, z, the picks' outputs, the union's inputs and outputs, the
	// aggregate, the routed and shared outputs; the dense FFN's two activations.
	si := int64(max(c.NumShared, 1)) * ni
	ffn := max(k+ne+l+k*l+2*k*l+2*k*ni+l+2*E+2*si, 2*int64(c.DenseInter)+E)
	// The mat-muls widen their input rows to float64 once per call (the widest input
	// counts), and MLA keeps a float64 accumulator row per query.
	widest := max(E, P, hm*dv, int64(c.QLoRA), int64(c.KVLoRA), l, ni, si, int64(c.DenseInter))
	return 4*(stream+max(kda, mla)+ffn+int64(c.Vocab)) + 8*(widest+int64(c.KVLoRA))
}

// Total is the memory the plan allocates: the trunk's arena and ring and the
// expert cache's slots or scratch. Session state, activations and the Go
// runtime come on top.
func (p Plan) Total() int64 {
	var n int64
	if p.Trunk != nil {
		n += p.Trunk.Total
	}
	if p.Cache != nil {
		n += p.Cache.Total
	}
	return n
}

// String itemises the plan, one component a line.
func (p Plan) String() string {
	var b strings.Builder
	if p.Mapped {
		fmt.Fprintf(&b, "dense weights  %s memory-mapped (no budget: the page cache holds what is touched)\n", trunk.Size(p.DenseBytes))
	} else {
		if p.Packed != "" {
			fmt.Fprintf(&b, "packed trunk   %s\n", p.Packed)
		}
		b.WriteString(p.Trunk.String())
		b.WriteByte('\n')
	}
	if c := p.Cache; c != nil {
		if c.Budget > 0 {
			fmt.Fprintf(&b, "expert cache   %s  %d × %s slots, %s", trunk.Size(c.Total), c.Slots, trunk.Size(c.SlotBytes), c.Policy)
		} else {
			fmt.Fprintf(&b, "expert cache   none: each expert read into %s of scratch (TopK slots)", trunk.Size(c.ScratchBytes))
		}
		if c.Prefetch > 0 {
			fmt.Fprintf(&b, ", router lookahead top %d", c.Prefetch)
		}
		b.WriteByte('\n')
	} else {
		fmt.Fprintf(&b, "experts        memory-mapped\n")
	}
	fmt.Fprintf(&b, "per session    KDA state %s, MLA cache %d B per position\n", trunk.Size(p.KDAStateBytes), p.MLABytesPerPosition)
	fmt.Fprintf(&b, "shared walks   up to %d rows, %s a row (%s at %d rows)", p.WalkRows, trunk.Size(p.WalkRowBytes),
		trunk.Size(p.WalkRowBytes*int64(p.WalkRows)), p.WalkRows)
	return b.String()
}
