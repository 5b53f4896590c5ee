package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// gb is the decimal gigabyte of SPEC §11.1's budgets.
const gb = 1e9

// preset is one row of SPEC §11.1's preset table: trunk and expert-cache budgets for the K3
// model. Floor and auto have no fixed figures: floor is the smallest configuration the engine
// accepts for the model (one trunk ring slot, TopK+1 expert slots), which the memory planner
// derives from the checkpoint; auto is computed from this machine's memory (autoBudget).
type preset struct {
	name        string
	trunkGB     float64
	cacheGB     float64
	floor, auto bool
	note        string
}

// presets is the table of SPEC §11.1 (measured peak RSS of the C engine on K3 in the notes).
var presets = []preset{
	{name: "laptop", trunkGB: 3.0, cacheGB: 1.0, note: "8.2 GB peak RSS measured"},
	{name: "desktop", trunkGB: 16, cacheGB: 10, note: "31.9 GB peak RSS measured"},
	{name: "workstation", trunkGB: 60, cacheGB: 30, note: "95.5 GB peak RSS measured"},
	{name: "server", trunkGB: 110, cacheGB: 13, note: "~128 GB; 90/93 layers pinned, fastest"},
	{name: "max", trunkGB: 110, cacheGB: 109, note: "~224 GB; not faster than server"},
	{name: "floor", floor: true, note: "the model's minimum: one trunk ring slot, TopK+1 expert slots (slow)"},
	{name: "auto", auto: true, note: "recommended: from MemAvailable and the cgroup memory.max limit"},
}

func lookupPreset(name string) (preset, bool) {
	for _, p := range presets {
		if p.name == name {
			return p, true
		}
	}
	return preset{}, false
}

// budgetError is a preset that cannot be satisfied on this machine (exit 2, SPEC §11.1).
type budgetError struct{ msg string }

func (e *budgetError) Error() string { return e.msg }

// presetBudget returns the trunk and expert-cache budgets in bytes for a preset. floor reports
// that the preset is the model's minimum, which the memory planner computes (trunk and cache
// are then 0). auto reads the machine's memory through mem.
func presetBudget(name string, mem func() (memInfo, error)) (trunk, cache int64, floor bool, err error) {
	p, ok := lookupPreset(name)
	if !ok {
		return 0, 0, false, usagef("--preset", "unknown preset %q (known: %s)", name, presetNames())
	}
	switch {
	case p.floor:
		return 0, 0, true, nil
	case p.auto:
		m, err := mem()
		if err != nil {
			return 0, 0, false, fmt.Errorf("preset auto: %w", err)
		}
		t, c, err := autoBudget(m)
		return t, c, false, err
	}
	return int64(p.trunkGB * gb), int64(p.cacheGB * gb), false, nil
}

func presetNames() string {
	s := ""
	for i, p := range presets {
		if i > 0 {
			s += ", "
		}
		s += p.name
	}
	return s
}

// Figures of the auto rule (SPEC §11.1), in GB, for the K3 model.
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

// autoBudget applies SPEC §11.1's auto rule to the memory this process may use: trunk first
// (capped below the RAM ceiling), the cache gets what remains once the trunk is whole.
func autoBudget(m memInfo) (trunk, cache int64, err error) {
	avail, total := float64(m.usable())/gb, float64(m.ceiling())/gb
	reserve := autoMargin + autoMarginFrac*avail + autoEmbedHead + autoState
	usable := avail - reserve
	if usable < autoMinUsable {
		return 0, 0, &budgetError{fmt.Sprintf("preset auto: %.2f GB available (%s) leaves %.2f GB after the %.2f GB reserve; at least %.1f GB is needed",
			avail, m.source(), usable, reserve, autoMinUsable)}
	}
	var t, c float64
	if usable-autoSlack >= autoFullTrunk {
		t, c = autoFullTrunk, usable-autoFullTrunk
	} else {
		t = math.Min(usable-autoSlack, math.Max(autoMinTrunk, autoTrunkShare*total-reserve-autoSlack))
		c = autoSmallCache
	}
	return int64(t * gb), int64(c * gb), nil
}

// listPresets prints the preset table; auto's row shows this machine's figures.
func listPresets(stdout, stderr io.Writer) int {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PRESET\tTRUNK GB\tCACHE GB\tNOTE")
	for _, p := range presets {
		t, c := fmt.Sprintf("%.2f", p.trunkGB), fmt.Sprintf("%.2f", p.cacheGB)
		note := p.note
		switch {
		case p.floor:
			t, c = "model", "model"
		case p.auto:
			m, err := readMemInfo()
			if err == nil {
				var tb, cb int64
				if tb, cb, err = autoBudget(m); err == nil {
					t, c = fmt.Sprintf("%.2f", float64(tb)/gb), fmt.Sprintf("%.2f", float64(cb)/gb)
					note += fmt.Sprintf(" (here: %s)", m.source())
				}
			}
			if err != nil {
				t, c = "-", "-"
				note += fmt.Sprintf(" (here: %v)", err)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.name, t, c, note)
	}
	if err := tw.Flush(); err != nil {
		fail(stderr, err)
		return exitRuntime
	}
	return exitOK
}
