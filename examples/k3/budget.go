package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/k3-project/k3"
)

// budgetFlags are the memory flags of `run` (SPEC §11.1 names).
var budgetFlags = flagSpec{"--trunk": true, "--trunk-gb": true, "--trunk-ring": true, "--trunk-slot-mb": true}

// budget is the validated memory request.
type budget struct {
	trunkDir   string
	trunkBytes int64 // 0: mapped
	ring       int
	slotBytes  int64
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
	return o
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
	var p progress
	var last int64
	report := func(done, total int64) {
		if p == nil {
			p = newProgress(stderr, total, "k3 pack-trunk")
		}
		if done > last {
			p.add(done - last)
			last = done
		}
	}
	err := k3.PackTrunk(a.pos[0], a.pos[1], report)
	if p != nil {
		p.finish()
	}
	if err != nil {
		fail(stderr, err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "packed the trunk of %s into %s in %.1f s\n", a.pos[0], a.pos[1], time.Since(start).Seconds())
	return exitOK
}

func gbString(n int64) string { return fmt.Sprintf("%.3f GB", float64(n)/1e9) }
