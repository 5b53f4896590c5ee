package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"text/tabwriter"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/preset"
	"github.com/k3-project/k3/sysmem"
	"github.com/k3-project/k3/trunk"
)

// budgetFlags are the memory flags run and plan share; the trunk-shape ones (--trunk,
// --trunk-slot-mb) are also the ladder's.
var budgetFlags = flagSpec{
	"--preset": true, "--trunk": true, "--trunk-source": true, "--trunk-gb": true, "--trunk-ring": true, "--trunk-slot-mb": true,
	"--cache-gb": true, "--cache-policy": true, "--prefetch": true, "--config": true, "--layers": true,
}

// budgetUsage documents budgetFlags in the help of run and plan.
const budgetUsage = `memory (flags apply in argv order: a later --trunk-gb or --cache-gb overrides --preset):
  --preset NAME      laptop, desktop, workstation, server, max (trunk/cache GB of §11.1),
                     floor (the model's trunk floor, no expert cache, experts read a few at a
                     time; run and serve collect garbage at 10% heap growth unless GOGC is set) or auto
                     (from MemAvailable and the cgroup memory.max) (k3 --list-presets prints
                     the table)
  --trunk-gb X       hold the dense weights in X decimal GB: pin the largest, stream the rest
                     (default: memory-map every shard)
  --trunk DIR        read the layers from a packed trunk (k3 pack-trunk)
  --trunk-source S   where a lossless12 pack's matrices are read from: packed, or shards (the
                     checkpoint's bf16 originals) (default: the plan's choice, which it prints)
  --trunk-ring N     ring slots, 1..8 (default 2; 1 = no read-ahead)
  --trunk-slot-mb X  largest piece streamed per slot in MB (default 67.1; smaller lowers the floor)
  --cache-gb X       serve routed experts from a cache of X GB (0: read every expert, keep none,
                     one scratch read per expert; below TopK+1 experts: keep none, read them
                     through X GB of scratch in waves; default: memory-map the shards)
  --cache-policy P   s3fifo (default) or lru
  --prefetch N       router lookahead: read the next layer's predicted top N experts ahead (0 = off)
  --config PATH      read the configuration from PATH (default <model_dir>/config.json)
  --layers N         run only the first N layers (a diagnostic: the output is not the model's;
                     layers_requested reports N); layers beyond the configuration are reported,
                     not refused
`

// budget is the validated memory request.
type budget struct {
	configPath string // --config
	layers     int    // --layers (0: all)
	preset     string // --preset
	// floor says the trunk budget is the model's floor (preset floor, not overridden by a
	// later --trunk-gb), which resolve asks package preset for once the model is known;
	// floorCache the same of the expert budget (the floor's read scratch, not overridden by a
	// later --cache-gb).
	floor, floorCache bool
	// cacheSet says a flag chose the expert cache (--cache-gb, or a preset's); codedNote is
	// the line that says which default resolve chose for entropy-coded experts.
	cacheSet  bool
	codedNote string
	// trunk are the options the trunk floor depends on (packed trunk, ring, slot) and the
	// trunk budget; other the rest.
	trunk, other []k3.Option
}

// parseBudget reads the budget flags; mistakes are recorded in a.err. --preset sets both
// budgets; a --trunk-gb or --cache-gb given after it on the command line wins (argv order), one
// given before it is overridden.
func parseBudget(a *args) budget {
	b := budget{configPath: a.vals["--config"], layers: a.int("--layers", 0, 1, 1<<20), cacheSet: a.has("--cache-gb")}
	presetTrunk := a.last("--preset", "--trunk-gb") == "--preset"
	presetCache := a.last("--preset", "--cache-gb") == "--preset"
	if name, ok := a.vals["--preset"]; ok && a.err == nil {
		b.preset = name
		var t, c int64 // the floor preset's budgets are resolved later, from the model
		if name == preset.Floor {
			b.floor, b.floorCache = presetTrunk, presetCache
		} else {
			var err error
			if t, c, err = preset.Budgets(name, ""); err != nil {
				a.check(usagef("--preset", "%v", err))
			}
		}
		if presetTrunk && t > 0 {
			b.trunk = append(b.trunk, k3.WithTrunkBudget(t))
		}
		if presetCache {
			b.cacheSet = true
			b.other = append(b.other, k3.WithCacheBudget(c))
		}
	}
	if dir := a.vals["--trunk"]; dir != "" {
		var src trunk.Source
		switch v, ok := a.vals["--trunk-source"]; {
		case !ok || v == "auto":
		case v == string(trunk.SourcePacked) || v == string(trunk.SourceShards):
			src = trunk.Source(v)
		default:
			a.check(usagef("--trunk-source", "%q is not auto, %s or %s", v, trunk.SourcePacked, trunk.SourceShards))
		}
		b.trunk = append(b.trunk, k3.WithPackedTrunk(dir, src))
	} else if a.has("--trunk-source") {
		a.check(usagef("--trunk-source", "needs --trunk"))
	}
	if !presetTrunk {
		if t := a.gb("--trunk-gb", 0); t > 0 {
			b.trunk = append(b.trunk, k3.WithTrunkBudget(t))
		}
	}
	if ring := a.int("--trunk-ring", 0, 1, 8); ring > 0 {
		b.trunk = append(b.trunk, k3.WithTrunkRing(ring))
	}
	if a.has("--trunk-slot-mb") && a.err == nil {
		s := a.vals["--trunk-slot-mb"]
		slot := int64(a.decimal("--trunk-slot-mb", 0) * 1e6)
		if a.err == nil && slot < 4096 {
			a.check(usagef("--trunk-slot-mb", "%s MB is below one 4096-byte page", s))
		}
		b.trunk = append(b.trunk, k3.WithTrunkSlot(slot))
	}
	if a.has("--cache-gb") && !presetCache {
		var c int64 // "0": read every expert, keep none
		if a.vals["--cache-gb"] != "0" {
			c = a.gb("--cache-gb", 0)
		}
		b.other = append(b.other, k3.WithCacheBudget(c))
	}
	if p, ok := a.vals["--cache-policy"]; ok {
		if p != "lru" && p != "s3fifo" {
			a.check(usagef("--cache-policy", "%q: want lru or s3fifo", p))
		}
		b.other = append(b.other, k3.WithCachePolicy(p))
	}
	if n := a.int("--prefetch", 0, 0, 1<<16); n > 0 {
		b.other = append(b.other, k3.WithExpertPrefetch(n))
	}
	if b.configPath != "" {
		b.other = append(b.other, k3.WithConfigFile(b.configPath))
	}
	if b.layers > 0 {
		b.other = append(b.other, k3.WithLayers(b.layers), k3.WithExtraLayers())
	}
	return b
}

// resolve replaces the floor preset by the model's trunk floor, which depends on the trunk's
// shape (packed, ring, slot) but not on the cache, and by its read scratch budget. When no flag
// chose the expert cache and the plan has one anyway (the library's choice for routed experts whose stamps say they are
// entropy-coded, a checkpoint written by compress-experts: budget 0, none kept), it raises that
// cache to the auto preset's budget (0 still when the machine's memory cannot be read);
// codedNote then says so, for the plan. A plan that cannot be made is left for the caller's own
// PlanFor or Open to report.
func (b *budget) resolve(dir string) error {
	if b.floor || b.floorCache {
		floor, scratch, err := preset.Budgets(preset.Floor, dir, b.trunk...)
		if err != nil {
			return err
		}
		if b.floor {
			b.trunk = append(b.trunk, k3.WithTrunkBudget(floor))
		}
		if b.floorCache { // after the preset's placeholder budget 0, so it wins
			b.other = append(b.other, k3.WithCacheBudget(scratch))
		}
		b.floor, b.floorCache = false, false
	}
	if b.cacheSet || b.codedNote != "" {
		return nil
	}
	if p, err := k3.PlanFor(dir, b.options()...); err != nil || p.Cache == nil {
		return nil
	}
	var c int64
	how := "the auto preset's"
	m, err := sysmem.Read()
	if err == nil {
		_, c, err = preset.AutoBudgets(m)
	}
	if err != nil {
		c, how = 0, fmt.Sprintf("none kept: %v", err)
	}
	b.other = append(b.other, k3.WithCacheBudget(c))
	b.codedNote = fmt.Sprintf("k3: the experts of %s are entropy-coded: expert cache %s by default (%s; --cache-gb to choose)",
		dir, size(c), how)
	return nil
}

// floorGCPercent is the garbage collector's growth target (GOGC) of a run at the floor preset.
// Most of the Go heap there is the session's KDA state and the checkpoint's tensor table, which
// live for the whole run; at Go's default of 100 the heap may grow by that much again in garbage
// before a collection, which on K3 was about 150 MB of the peak. Collections are rare all the
// same: decoding allocates little.
const floorGCPercent = 10

// lowGC sets the collector's target to floorGCPercent for a run at the floor preset, unless
// GOGC is set; the returned function restores the previous target.
func (b budget) lowGC() (restore func()) {
	if !b.floorGC() {
		return func() {}
	}
	old := debug.SetGCPercent(floorGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// settle returns the garbage of opening the model (header parsing, vectors widened and then
// transposed) to the operating system before generation touches the session's state, for a run
// at the floor preset, unless GOGC is set: otherwise those pages stay resident beside it.
func (b budget) settle() {
	if b.floorGC() {
		debug.FreeOSMemory()
	}
}

func (b budget) floorGC() bool { return b.preset == preset.Floor && os.Getenv("GOGC") == "" }

// config returns the configuration path the run reads.
func (b budget) config(modelDir string) string {
	if b.configPath != "" {
		return b.configPath
	}
	return filepath.Join(modelDir, "config.json")
}

// options are the k3 options of the budget.
func (b budget) options() []k3.Option { return append(b.trunk[:len(b.trunk):len(b.trunk)], b.other...) }

// gb is the decimal gigabyte of the budgets.
const gb = 1e9

// listPresets prints the preset table; auto's row shows this machine's figures.
func listPresets(stdout, stderr io.Writer) int {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PRESET\tTRUNK GB\tCACHE GB\tNOTE")
	for _, p := range preset.All() {
		t, c, note := float64(p.Trunk)/gb, float64(p.Cache)/gb, p.Note
		switch p.Name {
		case preset.Floor:
			fmt.Fprintf(tw, "%s\tmodel\tmodel\t%s\n", p.Name, note)
			continue
		case preset.Auto:
			m, err := sysmem.Read()
			var tb, cb int64
			if err == nil {
				tb, cb, err = preset.AutoBudgets(m)
			}
			if err != nil {
				fmt.Fprintf(tw, "%s\t-\t-\t%s (here: %v)\n", p.Name, note, err)
				continue
			}
			t, c, note = float64(tb)/gb, float64(cb)/gb, note+fmt.Sprintf(" (here: %s)", m)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%s\n", p.Name, t, c, note)
	}
	if err := tw.Flush(); err != nil {
		return failed(stderr, exitRuntime, err)
	}
	return exitOK
}

var planCmd = command{name: "plan", npos: 1, what: "exactly one model directory", main: plan,
	flags: merge(budgetFlags, flagSpec{"--json": false}), help: `usage: k3 plan <model_dir> [--preset NAME | --trunk-gb X | --cache-gb X | ...] [--json]

Prints the memory plan "k3 run" would use with the same budget flags, itemised (trunk: pinned
layers, ring, embedding, side tensors, bytes streamed per pass; expert cache; per-session state),
without loading any weights: only config.json, the index and the shard headers are read.
A budget below the model's floor is refused (exit 2) with the floor in the message.

  --json             the plan as JSON (the "plan" object of the run report)
  -h, --help         this help

` + budgetUsage}

// plan is `k3 plan <model_dir>`.
func plan(a *args, stdout, stderr io.Writer) int {
	b := parseBudget(a)
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	dir := a.pos[0]
	if err := b.resolve(dir); err != nil {
		return failed(stderr, openExit(err), err)
	}
	p, err := k3.PlanFor(dir, b.options()...)
	if err != nil {
		return failed(stderr, openExit(err), err)
	}
	if a.has("--json") {
		if err := writeJSON("-", stdout, p); err != nil {
			return failed(stderr, exitRuntime, err)
		}
		return exitOK
	}
	if b.preset != "" {
		fmt.Fprintf(stdout, "preset %s\n", b.preset)
	}
	if b.codedNote != "" {
		fmt.Fprintln(stdout, b.codedNote)
	}
	fmt.Fprintln(stdout, p.String())
	if m, err := sysmem.Read(); err == nil {
		// Session state, activations and the Go runtime come on top of the plan.
		fmt.Fprintf(stdout, "planned      %s (trunk + expert cache); usable here %s (%s)\n", size(p.Total()), size(m.Usable()), m)
	}
	return exitOK
}

// budgetRefused reports a budget below what the model needs (a validation error, exit 2).
func budgetRefused(err error) bool {
	return errors.Is(err, trunk.ErrBudget) || errors.Is(err, cache.ErrBudgetTooSmall)
}
