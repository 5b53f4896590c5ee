package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache/sim"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/preset"
	"github.com/k3-project/k3/sysmem"
)

// budget is the validated memory request.
type budget struct {
	configPath string // --config
	layers     int    // --layers (0: all)
	verify     bool   // --verify
	trunkDir   string
	trunkBytes int64 // 0: mapped
	ring       int
	slotBytes  int64
	cacheSet   bool
	cacheBytes int64
	policy     string
	prefetch   int
	traceDir   string
	// preset is the --preset name; floorTrunk says the trunk budget is the model's floor (preset
	// floor, not overridden by a later --trunk-gb), which resolve computes from the checkpoint.
	preset     string
	floorTrunk bool
}

// parseBudget reads the budget flags. --preset sets both budgets; a --trunk-gb or --cache-gb
// given after it on the command line wins (argv order), one given before it is overridden.
func parseBudget(a *args, mem func() (sysmem.Info, error)) (budget, error) {
	var b budget
	var err error
	vals := a.vals
	b.configPath = vals["--config"]
	_, b.verify = vals["--verify"]
	if v, ok := vals["--layers"]; ok {
		if b.layers, err = parseInt("--layers", v, 1, 1<<20); err != nil {
			return b, err
		}
	}
	presetTrunk, presetCache := false, false
	if name, ok := vals["--preset"]; ok {
		t, c, err := presetBudgets(name, mem)
		if err != nil {
			return b, usagef("--preset", "%v", err)
		}
		b.preset = name
		presetTrunk = a.last("--preset", "--trunk-gb") == "--preset"
		presetCache = a.last("--preset", "--cache-gb") == "--preset"
		if presetTrunk {
			b.trunkBytes, b.floorTrunk = t, name == preset.Floor
		}
		if presetCache {
			b.cacheSet, b.cacheBytes = true, c
		}
	}
	b.trunkDir = vals["--trunk"]
	if s, ok := vals["--trunk-gb"]; ok && !presetTrunk {
		if b.trunkBytes, err = parseGB("--trunk-gb", s); err != nil {
			return b, err
		}
	}
	if s, ok := vals["--trunk-ring"]; ok {
		if b.ring, err = parseInt("--trunk-ring", s, 1, 8); err != nil {
			return b, err
		}
	}
	if s, ok := vals["--cache-gb"]; ok && !presetCache {
		b.cacheSet, b.cacheBytes = true, 0
		if s != "0" {
			if b.cacheBytes, err = parseGB("--cache-gb", s); err != nil {
				return b, err
			}
		}
	}
	if s, ok := vals["--cache-policy"]; ok {
		if s != "lru" && s != "s3fifo" {
			return b, usagef("--cache-policy", "%q: want lru or s3fifo", s)
		}
		b.policy = s
	}
	if s, ok := vals["--prefetch"]; ok {
		if b.prefetch, err = parseInt("--prefetch", s, 0, 1<<16); err != nil {
			return b, err
		}
	}
	b.traceDir = vals["--dump-cache-trace"]
	if s, ok := vals["--trunk-slot-mb"]; ok {
		mb, err := parseDecimal("--trunk-slot-mb", s)
		if err != nil {
			return b, err
		}
		b.slotBytes = int64(mb * 1e6)
		if b.slotBytes < 4096 {
			return b, usagef("--trunk-slot-mb", "%s MB is below one 4096-byte page", s)
		}
	}
	return b, nil
}

// parseSizes parses a strictly increasing list of positive decimal GB (at most 64 sizes).
func parseSizes(flag, s string) ([]float64, error) {
	parts := strings.Split(s, ",")
	if len(parts) > 64 {
		return nil, usagef(flag, "%d sizes, at most 64", len(parts))
	}
	out := make([]float64, len(parts))
	for i, p := range parts {
		v, err := parseDecimal(flag, p)
		if err != nil {
			return nil, err
		}
		if v <= 0 || v > 1e6 {
			return nil, usagef(flag, "element %d: %s GB is outside (0, 1e6]", i, p)
		}
		if i > 0 && v <= out[i-1] {
			return nil, usagef(flag, "element %d: %s GB does not increase", i, p)
		}
		out[i] = v
	}
	return out, nil
}

// parseGB parses a positive, finite decimal number of gigabytes (10^9 bytes, as the C engine).
func parseGB(flag, s string) (int64, error) {
	v, err := parseDecimal(flag, s)
	if err != nil {
		return 0, err
	}
	if v <= 0 || v > 1e9 {
		return 0, usagef(flag, "%s GB is outside (0, 1e9]", s)
	}
	return int64(v * 1e9), nil
}

// parseDecimal accepts digits with at most one '.', nothing else (no sign, exponent, spaces,
// NaN or Inf).
func parseDecimal(flag, s string) (float64, error) {
	if s == "" || strings.Count(s, ".") > 1 || strings.Trim(s, "0123456789.") != "" || s == "." {
		return 0, usagef(flag, "%q is not a non-negative decimal number", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, usagef(flag, "%q is out of range", s)
	}
	return v, nil
}

// presetBudgets is preset.Budgets with the machine's memory read through mem, and the floor left
// to resolve (it needs the model directory).
func presetBudgets(name string, mem func() (sysmem.Info, error)) (trunk, cache int64, err error) {
	switch name {
	case preset.Floor:
		return 0, 0, nil
	case preset.Auto:
		m, err := mem()
		if err != nil {
			return 0, 0, fmt.Errorf("preset auto: %w", err)
		}
		return preset.AutoBudgets(m)
	}
	return preset.Budgets(name, "")
}

// resolve replaces the floor preset by the model's trunk floor.
func (b *budget) resolve(dir string) error {
	if !b.floorTrunk {
		return nil
	}
	floor, err := preset.FloorBudget(dir, b.trunkOnly().options()...)
	if err != nil {
		return err
	}
	b.trunkBytes, b.floorTrunk = floor, false
	return nil
}

// trunkOnly is b without its cache settings.
func (b budget) trunkOnly() budget {
	return budget{trunkDir: b.trunkDir, trunkBytes: b.trunkBytes, ring: b.ring, slotBytes: b.slotBytes}
}

// config returns the configuration path the run reads.
func (b budget) config(modelDir string) string {
	if b.configPath != "" {
		return b.configPath
	}
	return filepath.Join(modelDir, "config.json")
}

func (b budget) options() []k3.Option {
	var o []k3.Option
	if b.configPath != "" {
		o = append(o, k3.WithConfigFile(b.configPath))
	}
	if b.layers > 0 {
		o = append(o, k3.WithLayers(b.layers), k3.WithExtraLayers())
	}
	if b.verify {
		o = append(o, k3.WithVerify())
	}
	if b.trunkBytes > 0 {
		o = append(o, k3.WithTrunkBudget(b.trunkBytes))
	}
	if b.trunkDir != "" {
		o = append(o, k3.WithPackedTrunk(b.trunkDir))
	}
	if b.ring > 0 {
		o = append(o, k3.WithTrunkRing(b.ring))
	}
	if b.slotBytes > 0 {
		o = append(o, k3.WithTrunkSlot(b.slotBytes))
	}
	if b.cacheSet {
		o = append(o, k3.WithCacheBudget(b.cacheBytes))
	}
	if b.policy != "" {
		o = append(o, k3.WithCachePolicy(b.policy))
	}
	if b.prefetch > 0 {
		o = append(o, k3.WithExpertPrefetch(b.prefetch))
	}
	return o
}

var simCacheCmd = command{name: "sim-cache", flags: flagSpec{"--expert-bytes": true, "--disk-mbs": true, "--sizes-gb": true, "--plot": true},
	help: `usage: k3 sim-cache <expert_trace.bin> [--expert-bytes N] [--disk-mbs X] [--sizes-gb LIST] [--plot FILE.svg]

Replays a routed-expert trace (written by "k3 run --dump-cache-trace DIR", SPEC §9.7) under LRU,
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

// cmdSimCache is `k3 sim-cache <expert_trace.bin>`: the SPEC §9.7 table.
func cmdSimCache(argv []string, stdout, stderr io.Writer) int {
	a, code, ok := simCacheCmd.parse(argv, stdout, stderr)
	if !ok {
		return code
	}
	pos, vals := a.pos, a.vals
	var err error
	if len(pos) != 1 {
		err = usagef("", "expected one expert_trace.bin, got %d arguments", len(pos))
	}
	var o sim.Options
	if err == nil {
		if s, ok := vals["--expert-bytes"]; ok {
			var n int
			n, err = parseInt("--expert-bytes", s, 1, 1<<40)
			o.ExpertBytes = int64(n)
		}
	}
	if err == nil {
		if s, ok := vals["--disk-mbs"]; ok {
			o.DiskMBs, err = parseDecimal("--disk-mbs", s)
			if err == nil && o.DiskMBs <= 0 {
				err = usagef("--disk-mbs", "must be positive")
			}
		}
	}
	if s, ok := vals["--sizes-gb"]; ok && err == nil {
		o.CapacitiesGB, err = parseSizes("--sizes-gb", s)
	}
	plotPath := ""
	if s, ok := vals["--plot"]; ok && err == nil {
		plotPath, err = s, checkPlotPath(s)
	}
	if err != nil {
		return simCacheCmd.usageFail(stderr, err)
	}
	rep, err := sim.RunFile(pos[0], o)
	if err != nil {
		fmt.Fprintf(stderr, "k3: sim-cache: %v\n", err)
		return exitRuntime
	}
	if err := rep.Format(stdout); err != nil {
		fmt.Fprintf(stderr, "k3: sim-cache: %v\n", err)
		return exitRuntime
	}
	if plotPath != "" {
		if err := plotSimCache(rep, plotPath, pos[0]); err != nil {
			fmt.Fprintf(stderr, "k3: sim-cache: --plot: %v\n", err)
			return exitRuntime
		}
		fmt.Fprintf(stderr, "k3: sim-cache: chart written to %s\n", plotPath)
	}
	return exitOK
}

var packTrunkCmd = command{name: "pack-trunk", flags: flagSpec{}, help: `usage: k3 pack-trunk <model_dir> <out_dir>

Copies every layer's dense (trunk) tensors into out_dir/trunk.bin and writes trunk.json, the
packed trunk that "k3 run --trunk out_dir" streams from. Progress goes to stderr: a bar (bytes,
rate, ETA) on a terminal, plain lines otherwise.

  -h, --help   this help
`}

// cmdPackTrunk is `k3 pack-trunk <model_dir> <out_dir>`.
func cmdPackTrunk(argv []string, stdout, stderr io.Writer) int {
	a, code, ok := packTrunkCmd.parse(argv, stdout, stderr)
	if !ok {
		return code
	}
	if len(a.pos) != 2 {
		return packTrunkCmd.usageFail(stderr, usagef("", "expected <model_dir> <out_dir>, got %d positional arguments", len(a.pos)))
	}
	start := time.Now()
	report, finish := reportTo(stderr, "k3 pack-trunk", 0)
	err := checkpoint.PackTrunk(a.pos[0], a.pos[1], report)
	finish()
	if err != nil {
		fail(stderr, err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "packed the trunk of %s into %s in %.1f s\n", a.pos[0], a.pos[1], time.Since(start).Seconds())
	return exitOK
}

func gbString(n int64) string { return fmt.Sprintf("%.3f GB", float64(n)/1e9) }
