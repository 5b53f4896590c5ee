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
	// PackedSource is where the matrices the pack holds in lossless12 are read from: the pack,
	// or the checkpoint's bf16 originals where the format loses (WithPackedTrunk,
	// trunk.ChooseSource); PackedReason says why.
	PackedSource trunk.Source `json:"packed_source,omitempty"`
	PackedReason string       `json:"packed_source_reason,omitempty"`
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
	// WalkRowBytes bounds the scratch one row of a walk adds, at the model's thread count:
	// the residual stream and its block snapshots, the embeddings, output rows and logits,
	// every layer kind's scratch (KDA's and MLA's, the dense FFN's and the experts', the
	// expert union's inputs and outputs included: summed, as one arena grows through them),
	// and each worker's widened copies of the mat-mul inputs. A walk of N rows needs at
	// most N times this beyond what a walk of no rows would (counted as what its first pass
	// allocates, garbage included; TestWalkRowBytes); each MLA layer adds a score
	// row per worker sized by the longest context, and the sessions' own state
	// (KDAStateBytes, MLABytesPerPosition) comes on top.
	WalkRowBytes int64 `json:"walk_row_bytes"`
}

func (p *Plan) fillSession(c *config.Config, layers, threads int) {
	p.KDAStateBytes, p.MLABytesPerPosition = 0, 0
	p.WalkRows, p.WalkRowBytes = maxWalkRows, walkRowBytes(c, layers, threads)
	for l := range layers {
		if c.IsMLA(l) {
			p.MLABytesPerPosition += 4 * int64(c.KVLoRA+c.QKRope)
			continue
		}
		P := int64(c.KDAHeads * c.KDAHeadDim)
		p.KDAStateBytes += 4 * (int64(c.KDAHeads)*int64(c.KDAHeadDim)*int64(c.KDAHeadDim) + 3*P*int64(c.ConvK-1))
	}
}

// walkRowBytes is Plan.WalkRowBytes: an upper bound on what each row of a walk adds to the
// scratch the layers take, counted buffer by buffer as the walk sizes them by rows. Buffers that
// one arena or pool hands out in turn are summed, not maxed: a walk's first pass grows an arena
// from the KDA layers' size to the MLA layers' (and from the dense FFN's to the experts'), and a
// worker's pool of widened inputs through the input widths as they come, each growth a new
// buffer. threads scales what each worker holds: its chunk of the expert union and of the MLA
// heads, and its own widened copy of a mat-mul's input.
func walkRowBytes(c *config.Config, layers, threads int) int64 {
	w := int64(max(threads, 1))
	E := int64(c.Hidden)
	blocks := int64(1)
	if c.AttnResBlock > 0 {
		blocks += int64((layers + c.AttnResBlock - 1) / c.AttnResBlock)
	}
	// The residual wiring: block snapshots, the partial sum, x, a and f; the walk's embeddings
	// and output rows; the row's logits.
	f32 := E*(blocks+1+3+2) + int64(c.Vocab)
	// Attention, one arena: KDA's projections, gate and beta rows, then MLA's query latent,
	// queries, values and outputs, the batch's new cache rows and each worker's heads.
	P, D, H := int64(c.KDAHeads*c.KDAHeadDim), int64(c.KDAHeadDim), int64(c.KDAHeads)
	hm, dq, dv := int64(c.MLAHeads), int64(c.QKNope+c.QKRope), int64(c.VHead)
	rkv, kw := int64(c.KVLoRA), int64(c.KVLoRA+c.QKRope)
	f32 += 6*P + D + H
	f32 += int64(c.QLoRA) + hm*dq + 2*hm*dv + kw + w*(kw+rkv)
	f64 := w * rkv // each worker's MLA accumulator rows
	// The FFN, one arena: the dense FFN's two activations, then the routed layer's router
	// scores, picks and their weights, latent rows, the picks' latents, each worker's share of
	// the expert union's inputs and outputs, the aggregate, the output and the shared experts'.
	k, ne, l, ni := int64(c.TopK), int64(c.NumExperts), int64(c.Latent), int64(c.MoEInter)
	si := int64(max(c.NumShared, 1)) * ni
	f32 += 2 * int64(c.DenseInter)
	f32 += k + ne + 2*ne + l + k*l + w*(2*l+2*ni) + l + E + 2*si
	ints := 2*k + ne + 3*k + 1 // the picks, the union and its index
	// Widened inputs: each worker's pool buffer grows through the distinct input widths (two
	// pools: the MXFP4 kernels' and the other formats'), plus the AVX-512 GEMM's triplet sums.
	var widths int64
	seen := map[int]bool{}
	for _, x := range []int{c.Hidden, c.QLoRA, c.KVLoRA, c.MLAHeads * c.VHead, c.MLAHeads * (c.QKNope + c.QKRope),
		c.KDAHeads * c.KDAHeadDim, c.KDAHeadDim, c.Latent, c.MoEInter, max(c.NumShared, 1) * c.MoEInter, c.DenseInter} {
		if x > 0 && !seen[x] {
			seen[x] = true
			widths += int64(x)
		}
	}
	f64 += w * 2 * (widths + 8)
	return 4*f32 + 8*(f64+ints)
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
			switch p.PackedSource {
			case trunk.SourcePacked:
				fmt.Fprintf(&b, "  read        the pack (%s)\n", p.PackedReason)
			case trunk.SourceShards:
				fmt.Fprintf(&b, "  read        the checkpoint's bf16 originals of its lossless12 matrices (%s)\n", p.PackedReason)
			}
		}
		b.WriteString(p.Trunk.String())
		b.WriteByte('\n')
	}
	if c := p.Cache; c != nil {
		if c.Slots > 0 {
			fmt.Fprintf(&b, "expert cache   %s  %d × %s slots, %s", trunk.Size(c.Total), c.Slots, trunk.Size(c.SlotBytes), c.Policy)
		} else {
			fmt.Fprintf(&b, "expert cache   none: each expert read into %s of scratch (%d of TopK %d slots", trunk.Size(c.ScratchBytes),
				c.ScratchSlots, c.TopK)
			if c.Waves > 1 {
				fmt.Fprintf(&b, ", read in %d waves per MoE layer; %s", c.Waves, c.WaveCost())
			}
			b.WriteString(")")
		}
		if c.Prefetch > 0 {
			fmt.Fprintf(&b, ", router lookahead top %d", c.Prefetch)
		}
		b.WriteByte('\n')
	} else {
		fmt.Fprintf(&b, "experts        memory-mapped\n")
	}
	fmt.Fprintf(&b, "per session    KDA state %s, MLA cache %d B per position\n", trunk.Size(p.KDAStateBytes), p.MLABytesPerPosition)
	fmt.Fprintf(&b, "shared walks   up to %d rows, at most %s a row (%s at %d rows)", p.WalkRows, trunk.Size(p.WalkRowBytes),
		trunk.Size(p.WalkRowBytes*int64(p.WalkRows)), p.WalkRows)
	return b.String()
}
