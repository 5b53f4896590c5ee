package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant/rans"
)

const expertsUsage = `usage:
  k3 compress-experts <model_dir> <out_dir> [--force] [--workers N] [--no-verify]
      write a complete checkpoint directory whose routed-expert weights
      (...block_sparse_moe.experts.{e}.w{1,2,3}.weight_packed) are entropy-coded
      CFS1 records stamped in colibri.fmt; scales and every other tensor and file
      are kept (shards without experts and other files are hard-linked). The
      result is verified by decoding unless --no-verify.
  k3 verify-experts <dir> [--workers N]
      decode every coded tensor and compare it with the manifest's SHA-256
`

// selectExperts is the routed-expert rule: the packed MXFP4 weights of
// experts.{e}.w{1,2,3} are coded; each one's scale tensor stays raw.
func selectExperts(name string) (string, bool) {
	if _, _, key, ok := layout.ParseExpert(name); !ok || !strings.HasSuffix(key, ".weight_packed") {
		return "", false
	}
	return strings.TrimSuffix(name, "_packed") + "_scale", true
}

// progressPrinter writes one stderr line per shard written or linked and per
// percent of the coded bytes, so a 600 GB repack prints about 100 lines.
type progressPrinter struct {
	w       io.Writer
	verb    string
	start   time.Time
	percent int64
}

func (p *progressPrinter) report(ev rans.Progress) {
	switch ev.Op {
	case "write", "link", "copy":
		fmt.Fprintf(p.w, "k3: %s %s\n", map[string]string{"write": "wrote", "link": "linked", "copy": "copied"}[ev.Op], ev.File)
		return
	}
	pc := int64(100)
	if ev.TotalBytes > 0 {
		pc = 100 * ev.Bytes / ev.TotalBytes
	}
	if pc == p.percent && ev.Tensors != ev.TotalTensors {
		return
	}
	p.percent = pc
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(ev.Bytes) / el / 1e6
	}
	fmt.Fprintf(p.w, "k3: %s %d/%d tensors (%d%%), %s → %s, %.0f MB/s\n",
		p.verb, ev.Tensors, ev.TotalTensors, pc, gbString(ev.Bytes), gbString(ev.Stored), rate)
}

var (
	compressExpertsCmd = command{name: "compress-experts", flags: flagSpec{"--force": false, "--no-verify": false, "--workers": true},
		help: expertsUsage + "  -h, --help   this help\n"}
	verifyExpertsCmd = command{name: "verify-experts", flags: flagSpec{"--workers": true},
		help: expertsUsage + "  -h, --help   this help\n"}
)

func expertsArgs(c *command, argv []string, npos int, stdout, stderr io.Writer) ([]string, map[string]string, int, bool) {
	a, code, ok := c.parse(argv, stdout, stderr)
	if !ok {
		return nil, nil, code, false
	}
	var err error
	if len(a.pos) != npos {
		err = usagef("", "takes %d arguments, got %d", npos, len(a.pos))
	}
	if err == nil {
		if s, ok := a.vals["--workers"]; ok {
			_, err = parseInt("--workers", s, 1, 4096)
		}
	}
	if err != nil {
		return nil, nil, c.usageFail(stderr, err), false
	}
	return a.pos, a.vals, 0, true
}

func workersOf(vals map[string]string) int {
	n, err := parseInt("--workers", vals["--workers"], 1, 4096)
	if err != nil {
		return 0 // absent: GOMAXPROCS
	}
	return n
}

func cmdCompressExperts(args []string, stdout, stderr io.Writer) int {
	pos, vals, code, ok := expertsArgs(&compressExpertsCmd, args, 2, stdout, stderr)
	if !ok {
		return code
	}
	_, force := vals["--force"]
	_, noVerify := vals["--no-verify"]
	pp := &progressPrinter{w: stderr, verb: "coded", start: time.Now(), percent: -1}
	man, err := rans.Repack(pos[0], pos[1], rans.RepackOptions{Select: selectExperts, Progress: pp.report, Force: force, Workers: workersOf(vals)})
	if err != nil {
		fmt.Fprintf(stderr, "k3: compress-experts: %v\n", err)
		return exitRuntime
	}
	if len(man.Tensors) == 0 {
		fmt.Fprintf(stderr, "k3: compress-experts: warning: %s has no routed-expert weights; the copy has nothing coded\n", pos[0])
	}
	dec, stored := man.Totals()
	if !noVerify {
		vp := &progressPrinter{w: stderr, verb: "verified", start: time.Now(), percent: -1}
		if _, err := rans.Verify(pos[1], rans.VerifyOptions{Progress: vp.report, Workers: workersOf(vals)}); err != nil {
			fmt.Fprintf(stderr, "k3: compress-experts: the written checkpoint does not verify: %v\n", err)
			return exitRuntime
		}
	}
	fmt.Fprintf(stdout, "coded %d expert tensors: %d → %d bytes (%.4f, %.3f bits per 4-bit weight) in %s\n",
		len(man.Tensors), dec, stored, ratio(stored, dec), 8*ratio(stored, dec)/2, pos[1])
	return exitOK
}

func cmdVerifyExperts(args []string, stdout, stderr io.Writer) int {
	pos, vals, code, ok := expertsArgs(&verifyExpertsCmd, args, 1, stdout, stderr)
	if !ok {
		return code
	}
	vp := &progressPrinter{w: stderr, verb: "verified", start: time.Now(), percent: -1}
	rep, err := rans.Verify(pos[0], rans.VerifyOptions{Progress: vp.report, Workers: workersOf(vals)})
	if err != nil {
		fmt.Fprintf(stderr, "k3: verify-experts: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "verified %d coded tensors: %d bytes stored, %d decoded, all digests match\n",
		rep.Tensors, rep.RecordBytes, rep.DecodedBytes)
	return exitOK
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
