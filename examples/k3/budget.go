package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache/sim"
)

// budgetFlags are the memory flags of `run` (SPEC §11.1 names).
var budgetFlags = flagSpec{"--trunk": true, "--trunk-gb": true, "--trunk-ring": true, "--trunk-slot-mb": true,
	"--cache-gb": true, "--cache-policy": true, "--prefetch": true, "--dump-cache-trace": true}

// budget is the validated memory request.
type budget struct {
	trunkDir   string
	trunkBytes int64 // 0: mapped
	ring       int
	slotBytes  int64
	cacheSet   bool
	cacheBytes int64
	policy     string
	prefetch   int
	traceDir   string
}

func parseBudget(vals map[string]string) (budget, error) {
	var b budget
	var err error
	if s, ok := vals["--trunk"]; ok {
		if s == "" {
			return b, usagef("--trunk", "empty path")
		}
		b.trunkDir = s
	}
	if s, ok := vals["--trunk-gb"]; ok {
		if b.trunkBytes, err = parseGB("--trunk-gb", s); err != nil {
			return b, err
		}
	}
	if s, ok := vals["--trunk-ring"]; ok {
		if b.ring, err = parseInt("--trunk-ring", s, 1, 8); err != nil {
			return b, err
		}
	}
	if s, ok := vals["--cache-gb"]; ok {
		b.cacheSet = true
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
	if s, ok := vals["--dump-cache-trace"]; ok {
		if s == "" {
			return b, usagef("--dump-cache-trace", "empty path")
		}
		b.traceDir = s
	}
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

func (b budget) options() []k3.Option {
	var o []k3.Option
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

var simFlags = flagSpec{"--expert-bytes": true, "--disk-mbs": true}

// cmdSimCache is `k3 sim-cache <expert_trace.bin>`: the SPEC §9.7 table.
func cmdSimCache(args []string, stdout, stderr io.Writer) int {
	pos, vals, err := parseArgs(args, simFlags)
	if err == nil && len(pos) != 1 {
		err = usagef("", "sim-cache: expected one expert_trace.bin, got %d arguments", len(pos))
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
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitUsage
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
	return exitOK
}

// cmdPackTrunk is `k3 pack-trunk <model_dir> <out_dir>`.
func cmdPackTrunk(args []string, stdout, stderr io.Writer) int {
	pos, _, err := parseArgs(args, flagSpec{})
	if err == nil && len(pos) != 2 {
		err = usagef("", "pack-trunk: expected <model_dir> <out_dir>, got %d arguments", len(pos))
	}
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitUsage
	}
	start := time.Now()
	last := time.Time{}
	progress := func(done, total int64) {
		if now := time.Now(); now.Sub(last) >= time.Second || done == total {
			last = now
			rate := float64(done) / 1e6 / max(now.Sub(start).Seconds(), 1e-9)
			fmt.Fprintf(stderr, "pack-trunk: %s of %s (%.0f MB/s)\n", gbString(done), gbString(total), rate)
		}
	}
	if err := k3.PackTrunk(pos[0], pos[1], progress); err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "packed the trunk of %s into %s in %.1f s\n", pos[0], pos[1], time.Since(start).Seconds())
	return exitOK
}

func gbString(n int64) string { return fmt.Sprintf("%.3f GB", float64(n)/1e9) }
