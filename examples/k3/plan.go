package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/sysmem"
	"github.com/k3-project/k3/trunk"
)

var planCmd = command{name: "plan", npos: 1, what: "exactly one model directory", main: plan,
	flags: merge(budgetFlags, flagSpec{"--json": false}), help: `usage: k3 plan <model_dir> [--preset NAME | --trunk-gb X | --cache-gb X | ...] [--json]

Prints the memory plan "k3 run" would use with the same budget flags, itemised (trunk: pinned
layers, ring, embedding, side tensors, bytes streamed per pass; expert cache; per-session state),
without loading any weights: only config.json, the index and the shard headers are read.
Flags apply in argv order (a --trunk-gb or --cache-gb after --preset overrides it).

  --preset NAME      laptop, desktop, workstation, server, max, floor, auto (k3 --list-presets)
  --trunk-gb X       trunk budget in decimal GB (default: every shard memory-mapped)
  --trunk DIR        packed trunk (k3 pack-trunk)
  --trunk-ring N     ring slots, 1..8
  --trunk-slot-mb X  largest piece streamed per slot in MB
  --cache-gb X       expert-cache budget in GB (0: no cache, one scratch read per expert)
  --cache-policy P   s3fifo or lru
  --prefetch N       router lookahead depth
  --json             the plan as JSON (the "plan" object of the run report)
  -h, --help         this help

A budget below the model's floor is refused (exit 2) with the floor in the message.
`}

// plan is `k3 plan <model_dir>`.
func plan(a *args, stdout, stderr io.Writer) int {
	b := parseBudget(a)
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	dir := a.pos[0]
	if err := b.resolve(dir); err != nil {
		fail(stderr, err)
		return openExit(err)
	}
	p, err := k3.PlanFor(dir, b.options()...)
	if err != nil {
		fail(stderr, err)
		return openExit(err)
	}
	if a.has("--json") {
		if err := writeJSON("-", stdout, p); err != nil {
			fail(stderr, err)
			return exitRuntime
		}
		return exitOK
	}
	if b.preset != "" {
		fmt.Fprintf(stdout, "preset %s\n", b.preset)
	}
	fmt.Fprintln(stdout, p.String())
	if m, err := sysmem.Read(); err == nil {
		// Session state, activations and the Go runtime come on top of the plan.
		fmt.Fprintf(stdout, "planned      %s (trunk + expert cache); usable here %s (%s)\n", trunk.GB(p.Total()), trunk.GB(m.Usable()), m)
	}
	return exitOK
}

// budgetRefused reports a budget below what the model needs (a validation error, exit 2).
func budgetRefused(err error) bool {
	return errors.Is(err, trunk.ErrBudget) || errors.Is(err, cache.ErrBudgetTooSmall)
}
