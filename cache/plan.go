package cache

import (
	"cmp"
	"fmt"

	"github.com/k3-project/k3/trunk"
)

// Plan is the expert cache's part of a model's memory plan: what a Store
// built with its budget and policy holds, computed without opening
// anything.
type Plan struct {
	Budget      int64  `json:"budget_bytes"`
	Policy      string `json:"policy"`
	ExpertBytes int64  `json:"expert_bytes"`
	SlotBytes   int64  `json:"slot_bytes"`
	Slots       int    `json:"slots"`
	// ScratchBytes is the per-call read buffer when no cache is kept (a
	// budget of 0 or below MinBudget: ScratchSlots slots), 0 with a cache.
	ScratchBytes int64 `json:"scratch_bytes"`
	// ScratchSlots is how many experts that buffer holds (TopK unless
	// PlanConfig.ScratchSlots or a budget below MinBudget asks fewer) and Waves the read rounds per MoE
	// layer and token, ⌈TopK / ScratchSlots⌉; both 0 with a cache. With
	// two slots or more the MoE reads each round as two half-rounds, the
	// second read while the first runs (docs §9.2), in the same scratch. The
	// results are bit-identical; the cost is time, since fewer reads are in
	// flight at once. The figures below predate the half-rounds:
	// Measured with BenchmarkScratchWaves (budget 0, one decode token
	// through every MoE layer, one worker; 2 cores shared with a load of 8
	// to 10, experts in the page cache), against the TopK scratch: on the
	// wide fixture (top-k 8, 1.6 KB experts) 7 slots +5%, 4 slots +24%,
	// 1 slot +85%; on perf (top-k 8, 836 KB experts, 12 MoE layers) 1 slot
	// 1.2–2.2× and 4 or 7 slots 0.7–1.4× over two runs — on that host the
	// noise is as large as the effect of a few waves, and only one slot is
	// clearly slower. At the K3 geometry (k3-routed at the trunk floor, 16
	// picks of 17.6 MB, the same host; six runs interleaved, decode steps 1
	// and 2 of each) 1 slot decoded at 9.6–12.7 s/token, 2 slots at
	// 7.5–12.1 s and 16 slots at 9.6–29.0 s: no cost above the noise, the
	// token's time being the trunk's 111 GB and the experts' 68 GB of reads.
	ScratchSlots int   `json:"scratch_slots,omitempty"`
	Waves        int   `json:"waves,omitempty"`
	TopK         int   `json:"top_k"`
	Prefetch     int   `json:"prefetch"`
	Total        int64 `json:"total_bytes"`
}

// PlanConfig is what NewPlan needs to know.
type PlanConfig struct {
	ExpertBytes int64      // one routed expert's checkpoint bytes
	TopK        int        // experts a token routes to
	Budget      int64      // cache bytes; 0 keeps nothing (per-call scratch), below MinBudget sizes the scratch
	Policy      PolicyName // "" : S3FIFO
	Prefetch    int        // router lookahead width, recorded in the plan
	// ScratchSlots is Config.ScratchSlots: with Budget 0, the experts the
	// read scratch holds (1 to TopK; 0 means TopK).
	ScratchSlots int
}

// NewPlan plans the cache of c. A positive budget below one token's working
// set (MinBudget) keeps no cache: it bounds the read scratch instead, to
// ⌊Budget / SlotBytes⌋ slots (at most TopK), so a caller with a memory
// budget gets the smaller scratch by naming its size. A budget below one
// slot is refused with ErrBudgetTooSmall and both minimums in the message.
func NewPlan(c PlanConfig) (*Plan, error) {
	p := &Plan{Budget: c.Budget, Policy: string(S3FIFO), ExpertBytes: c.ExpertBytes, SlotBytes: SlotSize(c.ExpertBytes),
		Prefetch: c.Prefetch, TopK: c.TopK}
	if c.Policy != "" {
		p.Policy = string(c.Policy)
	}
	if err := checkScratchSlots(c.ScratchSlots, c.TopK, c.Budget); err != nil {
		return nil, err
	}
	scratch := c.ScratchSlots
	switch lo := MinBudget(p.SlotBytes, c.TopK); {
	case p.Budget >= lo:
		p.Slots = int(p.Budget / p.SlotBytes)
		p.Total = int64(p.Slots) * p.SlotBytes
		return p, nil
	case p.Budget >= p.SlotBytes:
		// Too small for a cache, large enough for a read scratch of at least one slot: the
		// budget bounds the scratch instead (at most TopK slots, below MinBudget), read in
		// waves (see ScratchSlots).
		scratch = int(p.Budget / p.SlotBytes)
	case p.Budget > 0:
		return nil, fmt.Errorf("%w: %d bytes asked, the minimum is %d bytes (%s: TopK + 1 = %d experts of %d bytes) for a cache, %d bytes (one expert) for a read scratch",
			ErrBudgetTooSmall, p.Budget, lo, trunk.Size(lo), c.TopK+1, p.SlotBytes, p.SlotBytes)
	}
	p.ScratchSlots = cmp.Or(scratch, c.TopK)
	p.Waves = (c.TopK + p.ScratchSlots - 1) / p.ScratchSlots
	p.ScratchBytes = int64(p.ScratchSlots) * p.SlotBytes
	p.Total = p.ScratchBytes
	return p, nil
}

// checkScratchSlots refuses a scratch size outside [0, topK], or one given
// with a cache budget (whose slots are the scratch).
func checkScratchSlots(n, topK int, budget int64) error {
	switch {
	case n < 0 || n > topK:
		return fmt.Errorf("cache: ScratchSlots %d: want 1 to TopK = %d (0: TopK)", n, topK)
	case n > 0 && budget > 0:
		return fmt.Errorf("cache: ScratchSlots %d with a budget of %d bytes: the scratch is for a zero budget", n, budget)
	}
	return nil
}

// WaveCost states what reading a layer's picks in p.Waves rounds was
// measured to cost in time (see ScratchSlots), for a plan to print beside the
// smaller scratch; "" with one round or a cache.
func (p *Plan) WaveCost() string {
	if p.Waves <= 1 {
		return ""
	}
	return "time cost measured within the noise on k3-routed, decode 7.5–12.7 s/token in 8 or 16 waves against 9.6–29 s in one, and up to +85% for small experts read 1 at a time on the wide fixture"
}
