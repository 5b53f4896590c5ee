package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache/sim"
	"github.com/k3-project/k3/cache/trace"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/layout"
)

var simCacheCmd = command{name: "sim-cache", npos: 1, what: "one expert_trace.bin", main: simCache,
	flags: flagSpec{"--expert-bytes": true, "--disk-mbs": true, "--sizes-gb": true, "--plot": true, "--model": true},
	help: `usage: k3 sim-cache <expert_trace.bin> [--model DIR] [--expert-bytes N] [--disk-mbs X] [--sizes-gb LIST] [--plot FILE.svg]

Replays a routed-expert trace (written by "k3 run --dump-cache-trace DIR", §9.7) under LRU,
S3-FIFO (the expert cache's own policy code), Belady with bypass and PIN+LRU at a range of cache
sizes and prints the hit rates and the expert bytes read per token. Every size asked for is a row:
one too small for a token's experts (fewer than top-k + 1 slots) says so instead of numbers. The
trace is streamed, so its length does not matter to memory (a next-use file of 4 bytes a request
is kept, unlinked, beside it or in the temporary directory); a long replay reports its progress.

The geometry (top-k, MoE layers, the expert size) comes from the trace's header. A trace written
before the header existed has none: give --model, or K3's geometry is assumed (with a warning).

  --model DIR        the model the trace was recorded on (its config.json): the geometry of a
                     headerless trace, a cross-check of a headed one
  --expert-bytes N   bytes of one expert (default: the trace's; else K3's 17547264); refused when
                     it contradicts the trace's header
  --disk-mbs X       disk read speed in MB/s for the SEC/TOK column (default 1234)
  --sizes-gb LIST    cache sizes to replay, comma-separated decimal GB, increasing (default: K3's
                     8,16,32,64,128,192,256,384,512,768,1024,1450 for K3's expert size; for other
                     models top-k + 1 slots doubling up to the whole pool)
  --plot FILE.svg    also draw the hit rate of each policy against the cache size (.svg or .png)
  -h, --help         this help

Exit codes: 0 a table; 2 a bad flag, a flag that contradicts the trace, a damaged or truncated trace
(refused by name), or no size that could be simulated; 1 any other failure.
`}

// simCache is `k3 sim-cache <expert_trace.bin>`: the §9.7 table.
func simCache(a *args, stdout, stderr io.Writer) int {
	o := sim.Options{ExpertBytes: int64(a.int("--expert-bytes", 0, 1, 1<<40)), DiskMBs: a.decimal("--disk-mbs", 0)}
	if a.has("--disk-mbs") && a.err == nil && o.DiskMBs <= 0 {
		a.check(usagef("--disk-mbs", "must be positive"))
	}
	o.CapacitiesGB = get(a, "--sizes-gb", nil, parseSizes)
	plotPath := a.plotPath()
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	path := a.pos[0]
	geo, err := simGeometry(path, a.vals["--model"], &o)
	if err != nil {
		return failed(stderr, simExit(err), fmt.Errorf("sim-cache: %w", err))
	}
	if o.CapacitiesGB == nil {
		o.CapacitiesGB = defaultSizes(geo, o.ExpertBytes)
	}
	o.Progress = sparseProgress(stderr, time.Now)
	rep, err := sim.RunFile(path, o)
	if err != nil {
		return failed(stderr, simExit(err), fmt.Errorf("sim-cache: %w", err))
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "k3: sim-cache: warning: %s\n", w)
	}
	if err := rep.Format(stdout); err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("sim-cache: %w", err))
	}
	if len(rep.Rows) == 0 {
		return failed(stderr, exitUsage, fmt.Errorf("sim-cache: none of the %d sizes could be simulated (see the rows above)", len(rep.Unsimulated)))
	}
	if plotPath != "" {
		if err := plotSimCache(rep, plotPath, path); err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("sim-cache: --plot: %w", err))
		}
		fmt.Fprintf(stderr, "k3: sim-cache: chart written to %s\n", plotPath)
	}
	return exitOK
}

// simGeometry reads the trace's header and --model's configuration and
// fills what o leaves open: the model's top-k and MoE layers always (the
// simulator refuses them if they contradict the header), the expert size
// only where the header has none. It returns the geometry the defaults are
// chosen from (zero fields: unknown).
func simGeometry(path, model string, o *sim.Options) (trace.Geometry, error) {
	tr, err := trace.Open(path)
	if err != nil {
		return trace.Geometry{}, err
	}
	h, _ := tr.Header()
	tr.Close()
	g := h.Geometry
	if model != "" {
		cfg, err := config.Load(filepath.Join(model, "config.json"))
		if err != nil {
			return g, fmt.Errorf("--model: %w", err)
		}
		o.TopK, o.MoELayers = cfg.TopK, cfg.NumLayers-cfg.FirstDense
		if g.ExpertBytes == 0 && o.ExpertBytes == 0 {
			o.ExpertBytes = layout.ExpertBytes(cfg)
		}
		if g.Layers == 0 {
			g.Layers, g.Experts = cfg.NumLayers, cfg.NumExperts
		}
		g.TopK, g.MoELayers = cmp.Or(g.TopK, o.TopK), cmp.Or(g.MoELayers, o.MoELayers)
	}
	if o.ExpertBytes == 0 {
		o.ExpertBytes = g.ExpertBytes
	}
	return g, nil
}

// defaultSizes is K3's table for K3's expert size (or an unknown one), and
// otherwise top-k + 1 slots doubling until the whole pool fits (at most 12
// sizes): K3's gigabytes are meaningless for experts of a few kilobytes.
func defaultSizes(g trace.Geometry, expertBytes int64) []float64 {
	if expertBytes == 0 || expertBytes == sim.DefaultExpertBytes || g.TopK == 0 {
		return nil
	}
	pool := int64(max(g.MoELayers, 1)) * int64(g.Experts)
	var out []float64
	for slots := int64(g.TopK + 1); len(out) < 12; slots *= 2 {
		// Half a slot more, so that ⌊GB·1e9/expertBytes⌋ cannot round down to slots − 1.
		out = append(out, (float64(slots)+0.5)*float64(expertBytes)/1e9)
		if slots >= pool {
			break
		}
	}
	return out
}

// simExit is 2 for a trace or flag refused by name (untrusted input), 1 otherwise.
func simExit(err error) int {
	for _, e := range []error{trace.ErrTruncated, trace.ErrHeader, trace.ErrSize, trace.ErrRecord, trace.ErrExpertBytes,
		sim.ErrGeometry, sim.ErrTooLong} {
		if errors.Is(err, e) {
			return exitUsage
		}
	}
	if _, ok := errors.AsType[*config.ConfigError](err); ok {
		return exitUsage
	}
	return exitRuntime
}

// sparseProgress reports a replay's progress on stderr at most every five
// seconds, and not at all for one that ends sooner: a line, not a bar, since
// stderr may be a pipe.
func sparseProgress(stderr io.Writer, now func() time.Time) func(done, total int64) {
	start := now()
	last := start
	return func(done, total int64) {
		t := now()
		if t.Sub(last) < 5*time.Second || done >= total {
			return
		}
		last = t
		fmt.Fprintf(stderr, "k3: sim-cache: %.0f%% of the replay after %.0f s\n", 100*float64(done)/float64(total), t.Sub(start).Seconds())
	}
}

// traceDump is run's --dump-cache-trace: the trace writer and what ends it.
type traceDump struct {
	w *trace.FileWriter
}

// startTraceDump creates dir and starts a trace there with the model's
// geometry; it is checked before any weights load, so an unwritable
// directory costs nothing.
func startTraceDump(dir string, cfg *config.Config) (*traceDump, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--dump-cache-trace: %w", err)
	}
	w, err := trace.New(dir, trace.Geometry{Layers: cfg.NumLayers, Experts: cfg.NumExperts, TopK: cfg.TopK,
		MoELayers: cfg.NumLayers - cfg.FirstDense, ExpertBytes: layout.ExpertBytes(cfg)})
	if err != nil {
		return nil, fmt.Errorf("--dump-cache-trace: %w", err)
	}
	return &traceDump{w: w}, nil
}

// expertBytes records the expert size the plan's cache uses (it is what
// the store's slots hold, and what sim-cache must be given).
func (d *traceDump) expertBytes(plan k3.Plan) {
	if d != nil && plan.Cache != nil && plan.Cache.ExpertBytes > 0 {
		d.w.SetExpertBytes(plan.Cache.ExpertBytes)
	}
}

// finish completes the dump and returns code, or exitRuntime when code was
// exitOK and the trace could not be written whole (it is then not left).
func (d *traceDump) finish(code int, stderr io.Writer) int {
	if d == nil {
		return code
	}
	if err := d.w.Close(); err != nil {
		fmt.Fprintf(stderr, "k3: --dump-cache-trace: %v\n", err)
		return cmp.Or(code, exitRuntime)
	}
	return code
}

// abort drops an unfinished dump; after finish it does nothing.
func (d *traceDump) abort() { d.w.Abort() }
