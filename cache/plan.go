package cache

import "fmt"

// Plan is the expert cache's part of a model's memory plan: what a Store
// built with its budget and policy holds, computed without opening
// anything.
type Plan struct {
	Budget      int64  `json:"budget_bytes"`
	Policy      string `json:"policy"`
	ExpertBytes int64  `json:"expert_bytes"`
	SlotBytes   int64  `json:"slot_bytes"`
	Slots       int    `json:"slots"`
	// ScratchBytes is the per-call read buffer of a zero budget (TopK slots), 0 otherwise.
	ScratchBytes int64 `json:"scratch_bytes"`
	Prefetch     int   `json:"prefetch"`
	Total        int64 `json:"total_bytes"`
}

// PlanConfig is what NewPlan needs to know.
type PlanConfig struct {
	ExpertBytes int64      // one routed expert's checkpoint bytes
	TopK        int        // experts a token routes to
	Budget      int64      // cache bytes; 0 keeps nothing (per-call scratch)
	Policy      PolicyName // "" : S3FIFO
	Prefetch    int        // router lookahead width, recorded in the plan
}

// NewPlan plans the cache of c. A positive budget below one token's working
// set (MinBudget) is refused with ErrBudgetTooSmall and the minimum in the
// message.
func NewPlan(c PlanConfig) (*Plan, error) {
	p := &Plan{Budget: c.Budget, Policy: string(S3FIFO), ExpertBytes: c.ExpertBytes, SlotBytes: SlotSize(c.ExpertBytes), Prefetch: c.Prefetch}
	if c.Policy != "" {
		p.Policy = string(c.Policy)
	}
	if p.Budget > 0 {
		if lo := MinBudget(p.SlotBytes, c.TopK); p.Budget < lo {
			return nil, fmt.Errorf("%w: %d bytes asked, the minimum is %d bytes (%s: TopK + 1 = %d experts of %d bytes)",
				ErrBudgetTooSmall, p.Budget, lo, gb(lo), c.TopK+1, p.SlotBytes)
		}
		p.Slots = int(p.Budget / p.SlotBytes)
		p.Total = int64(p.Slots) * p.SlotBytes
	} else {
		p.ScratchBytes = int64(c.TopK) * p.SlotBytes
		p.Total = p.ScratchBytes
	}
	return p, nil
}

// gb formats a byte count as trunk.GB does, so plan messages read alike
// (this package does not import trunk).
func gb(n int64) string {
	if n < 100e6 {
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}
