// Package preset holds k3's memory presets: named trunk and expert-cache
// budgets for the K3 model (§11.1), the auto rule that sizes them from
// the memory this machine lets the process use, and the floor, the least
// memory a checkpoint runs in.
//
// Start with Budgets, which turns a preset name and a checkpoint directory
// into the two budgets for k3.WithTrunkBudget and k3.WithCacheBudget.
// Suggest picks the preset for a checkpoint on a machine, and TokenReads
// estimates what a token reads from disk under its plan.
package preset

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/sysmem"
	"github.com/k3-project/k3/trunk"
)

// Names of the presets whose budgets are derived rather than fixed.
const (
	Floor = "floor" // the checkpoint's minimum (FloorBudget)
	Auto  = "auto"  // sized from this machine's memory (AutoBudgets)
)

// Errors of the presets (errors.Is).
var (
	// ErrUnknown: no preset has the name.
	ErrUnknown = errors.New("preset: unknown preset")
	// ErrTooLittleMemory: the auto rule finds too little memory for K3.
	ErrTooLittleMemory = errors.New("preset auto: too little memory for K3")
)

// Preset is one row of the preset table.
type Preset struct {
	Name string
	// Trunk and Cache are the budgets in bytes, both 0 for Floor and Auto,
	// whose budgets Budgets derives.
	Trunk, Cache int64
	// Note is what the row is for, with the peak RSS measured on K3.
	Note string
}

// gb is the decimal gigabyte the presets are written in.
const gb = 1e9

// All returns the preset table, smallest first, then Floor and Auto (a new
// slice on every call).
func All() []Preset {
	return []Preset{
		{Name: "laptop", Trunk: 3 * gb, Cache: 1 * gb, Note: "8.2 GB peak RSS measured"},
		{Name: "desktop", Trunk: 16 * gb, Cache: 10 * gb, Note: "31.9 GB peak RSS measured"},
		{Name: "workstation", Trunk: 60 * gb, Cache: 30 * gb, Note: "95.5 GB peak RSS measured"},
		{Name: "server", Trunk: 110 * gb, Cache: 13 * gb, Note: "~128 GB; 90/93 layers pinned, fastest"},
		{Name: "max", Trunk: 110 * gb, Cache: 109 * gb, Note: "~224 GB; not faster than server"},
		{Name: Floor, Note: fmt.Sprintf("the model's minimum: one trunk ring slot, experts read %d at a time (slow)", FloorScratchSlots)},
		{Name: Auto, Note: "recommended: from MemAvailable and the cgroup memory limit"},
	}
}

// Lookup returns the preset called name; the error lists the known names.
func Lookup(name string) (Preset, error) {
	var names []string
	for _, p := range All() {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Preset{}, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(names, ", "))
}

// Budgets returns the trunk and expert-cache budgets in bytes of the preset
// called name for the checkpoint in dir: a fixed row's figures; for Auto,
// AutoBudgets of this machine (sysmem.Read); for Floor, the checkpoint's
// trunk floor (FloorBudget, planned with opts) and no expert cache, only a
// read scratch of FloorScratchSlots experts (a cache budget below a cache's
// minimum means that; see k3.WithCacheBudget). dir is read only for Floor.
func Budgets(name, dir string, opts ...k3.Option) (trunk, cache int64, err error) {
	p, err := Lookup(name)
	if err != nil {
		return 0, 0, err
	}
	switch p.Name {
	case Floor:
		p, err := floorPlan(dir, opts)
		if err != nil {
			return 0, 0, err
		}
		return p.Trunk.Floor, floorScratch(p.Cache), nil
	case Auto:
		m, err := sysmem.Read()
		if err != nil {
			return 0, 0, fmt.Errorf("preset auto: %w", err)
		}
		return AutoBudgets(m)
	}
	return p.Trunk, p.Cache, nil
}

// floorPlanBudget is a trunk budget larger than any checkpoint: its plan
// pins everything, and a trunk plan reports its floor whatever the budget.
const floorPlanBudget = 1 << 50

// FloorBudget is the smallest trunk budget the checkpoint in dir accepts
// (one ring slot of its largest streamed piece, with the embedding, head
// and side tensors), found by planning without loading anything. opts are
// the options the model will be opened with (a packed trunk, ring or slot
// size change the floor); a trunk budget among them is overridden.
func FloorBudget(dir string, opts ...k3.Option) (int64, error) {
	floor, _, err := trunkSpan(dir, opts)
	return floor, err
}

// FullBudget is the trunk budget that pins the whole trunk of the
// checkpoint in dir (every layer and the head): the total of its plan under
// a budget larger than any checkpoint, found as FloorBudget is.
func FullBudget(dir string, opts ...k3.Option) (int64, error) {
	_, full, err := trunkSpan(dir, opts)
	return full, err
}

func trunkSpan(dir string, opts []k3.Option) (floor, full int64, err error) {
	p, err := floorPlan(dir, opts)
	if err != nil {
		return 0, 0, err
	}
	return p.Trunk.Floor, p.Trunk.Total, nil
}

// floorPlan plans dir with opts under a trunk budget larger than any
// checkpoint and no expert cache: its trunk part reports the floor and the
// full budget, its cache part the expert slot size.
func floorPlan(dir string, opts []k3.Option) (k3.Plan, error) {
	opts = append(opts[:len(opts):len(opts)], k3.WithTrunkBudget(floorPlanBudget), k3.WithCacheBudget(0))
	p, err := k3.PlanFor(dir, opts...)
	if err != nil {
		return p, fmt.Errorf("preset: trunk budgets of %s: %w", dir, err)
	}
	if p.Trunk == nil || p.Cache == nil {
		return p, fmt.Errorf("preset: %s: the plan has no trunk or no expert part", dir)
	}
	return p, nil
}

// FloorScratchSlots is how many routed experts the floor preset's read
// scratch holds: a layer's TopK picks are read in ⌈TopK / FloorScratchSlots⌉
// waves. On K3 (TopK 16, 17.6 MB an expert) the TopK scratch was 281 MB of a
// 1.14 GB floor; the waves cost time, not bits (cache.Plan.WaveCost).
const FloorScratchSlots = 2

// floorScratch is the cache budget that asks for the floor's read scratch
// under the cache plan c (of budget 0): FloorScratchSlots slots, 0 (the TopK
// scratch) when TopK is no larger.
func floorScratch(c *cache.Plan) int64 {
	if c.TopK <= FloorScratchSlots {
		return 0
	}
	return FloorScratchSlots * c.SlotBytes
}

// Figures of the auto rule (§11.1), in GB, for the K3 model.
const (
	autoMargin     = 2.0
	autoMarginFrac = 0.02
	autoEmbedHead  = 4.70 // embedding + lm_head
	autoState      = 1.70 // recurrent state, KV, scratch
	autoMinUsable  = 3.0
	autoFullTrunk  = 111 // the whole trunk pinned
	autoSlack      = 0.5
	autoMinTrunk   = 2.5
	autoTrunkShare = 0.55 // of the RAM ceiling: pinning more pushed RSS to ~90% and ran slower
	autoSmallCache = 0.5
)

// reserve is what the auto rule keeps outside the two budgets, in GB.
func reserve(availGB float64) float64 {
	return autoMargin + autoMarginFrac*availGB + autoEmbedHead + autoState
}

// AutoBudgets applies the auto rule (§11.1) to the memory m: the trunk
// first, capped below the memory ceiling; the cache gets what remains once
// the whole trunk is pinned. Too little memory is ErrTooLittleMemory, with
// the figures in the message.
func AutoBudgets(m sysmem.Info) (trunk, cache int64, err error) {
	avail, total := float64(m.Usable())/gb, float64(m.Ceiling())/gb
	res := reserve(avail)
	usable := avail - res
	if usable < autoMinUsable {
		return 0, 0, fmt.Errorf("%w: %.2f GB available (%s) leaves %.2f GB after the %.2f GB reserve; at least %.1f GB is needed",
			ErrTooLittleMemory, avail, m, usable, res, autoMinUsable)
	}
	var t, c float64
	if usable-autoSlack >= autoFullTrunk {
		t, c = autoFullTrunk, usable-autoFullTrunk
	} else {
		t = math.Min(usable-autoSlack, math.Max(autoMinTrunk, autoTrunkShare*total-res-autoSlack))
		c = autoSmallCache
	}
	return int64(t * gb), int64(c * gb), nil
}

// Largest returns the largest fixed preset whose budgets plus the auto
// rule's reserve fit in m's usable memory; ok is false when none does.
func Largest(m sysmem.Info) (p Preset, ok bool) {
	avail := float64(m.Usable()) / gb
	for _, q := range All() {
		if q.Trunk > 0 && float64(q.Trunk+q.Cache)/gb+reserve(avail) <= avail {
			p, ok = q, true
		}
	}
	return p, ok
}

// TokenReads estimates the bytes one decoded token reads under plan p of a
// model configured by c: the trunk's streamed bytes per pass, and c.TopK
// experts per MoE layer times the miss rate. The miss rate is 1 unless the
// expert cache holds more than one token's experts; then it is the share of
// all experts not resident (uniform routing, a pessimistic figure for a
// trained router). Experts memory-mapped (p has no cache) count 0: the page
// cache decides what they cost.
func TokenReads(c *config.Config, p k3.Plan) (trunk, experts int64) {
	if p.Trunk != nil {
		trunk = p.Trunk.StreamBytes
	}
	if p.Cache == nil {
		return trunk, 0
	}
	moeLayers := int64(c.NumLayers - c.FirstDense)
	need := int64(c.TopK) * moeLayers
	miss := 1.0
	if int64(p.Cache.Slots) > need {
		miss = math.Max(0, 1-float64(p.Cache.Slots)/float64(int64(c.NumExperts)*moeLayers))
	}
	return trunk, int64(float64(need*p.Cache.ExpertBytes) * miss)
}

// Suggestion is the preset Suggest picks for a checkpoint on a machine.
type Suggestion struct {
	// Name is Auto or Floor, "" when even the floor does not fit.
	Name string
	// Plan is the checkpoint's plan under Name; Floor its plan at the
	// trunk floor with no expert cache, the least it runs in.
	Plan, Floor k3.Plan
}

// Suggest picks the preset for the checkpoint in dir on a machine with the
// memory m: Auto when the auto rule finds room on m and the checkpoint
// accepts its budgets, otherwise Floor when the floor plan fits m.Usable(),
// otherwise none. The auto figures are sized for K3: a small checkpoint
// whose floor is above them runs at its floor instead. opts are the options
// the model will be opened with; budgets among them are overridden.
func Suggest(dir string, m sysmem.Info, opts ...k3.Option) (Suggestion, error) {
	var s Suggestion
	floor, scratch, err := Budgets(Floor, dir, opts...)
	if err == nil {
		s.Floor, err = k3.PlanFor(dir, withBudgets(opts, floor, scratch)...)
	}
	if err != nil {
		return s, err
	}
	if s.Floor.Total() > m.Usable() {
		return s, nil
	}
	s.Name, s.Plan = Floor, s.Floor
	if t, c, err := AutoBudgets(m); err == nil {
		p, err := k3.PlanFor(dir, withBudgets(opts, t, c)...)
		switch {
		case err == nil:
			s.Name, s.Plan = Auto, p
		case !errors.Is(err, trunk.ErrBudget) && !errors.Is(err, cache.ErrBudgetTooSmall):
			return s, err
		}
	}
	return s, nil
}

// withBudgets is opts followed by the trunk and cache budgets, which
// override any among opts.
func withBudgets(opts []k3.Option, trunk, cache int64) []k3.Option {
	return append(opts[:len(opts):len(opts)], k3.WithTrunkBudget(trunk), k3.WithCacheBudget(cache))
}
