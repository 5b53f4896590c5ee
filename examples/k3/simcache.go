package main

import (
	"cmp"
	"fmt"
	"io"
	"os"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache/sim"
	"github.com/k3-project/k3/cache/trace"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/layout"
)

var simCacheCmd = command{name: "sim-cache", npos: 1, what: "one expert_trace.bin", main: simCache,
	flags: flagSpec{"--expert-bytes": true, "--disk-mbs": true, "--sizes-gb": true, "--plot": true},
	help: `usage: k3 sim-cache <expert_trace.bin> [--expert-bytes N] [--disk-mbs X] [--sizes-gb LIST] [--plot FILE.svg]

Replays a routed-expert trace (written by "k3 run --dump-cache-trace DIR", §9.7) under LRU,
S3-FIFO (the expert cache's own policy code), Belady with bypass and PIN+LRU at cache sizes from
8 GB to 1450 GB and prints the hit rates and the expert bytes read per token.

  --expert-bytes N   bytes of one expert (default 17547264, the real K3's)
  --disk-mbs X       disk read speed in MB/s for the SEC/TOK column (default 1234)
  --sizes-gb LIST    cache sizes to replay, comma-separated decimal GB, increasing (default
                     8,16,32,64,128,192,256,384,512,768,1024,1450); a small model's trace needs
                     small sizes (its experts are small), e.g. --sizes-gb 0.0001,0.0002,0.0004
  --plot FILE.svg    also draw the hit rate of each policy against the cache size (.svg or .png)
  -h, --help         this help
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
	rep, err := sim.RunFile(a.pos[0], o)
	if err == nil {
		err = rep.Format(stdout)
	}
	if err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("sim-cache: %w", err))
	}
	if plotPath != "" {
		if err := plotSimCache(rep, plotPath, a.pos[0]); err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("sim-cache: --plot: %w", err))
		}
		fmt.Fprintf(stderr, "k3: sim-cache: chart written to %s\n", plotPath)
	}
	return exitOK
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
