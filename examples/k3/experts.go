package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant/rans"
)

const expertsUsage = `usage:
  k3 compress-experts <model_dir> <out_dir> [--force] [--workers N] [--no-verify]
      write a complete checkpoint directory whose routed-expert weights
      (...block_sparse_moe.experts.{e}.w{1,2,3}.weight_packed) are entropy-coded
      CFS1 records stamped in colibri.fmt; scales and every other tensor and file
      are kept (shards without experts and other files are hard-linked). The
      result is verified by decoding unless --no-verify. --force replaces an
      earlier output: its manifest, index and shards are removed before anything
      is written, so a run that fails or is interrupted leaves nothing that
      verify-experts accepts. Nothing is written inside model_dir.
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

// expertsProgress shows a coding or verifying pass's decoded bytes on a meter labelled desc.
func expertsProgress(stderr io.Writer, desc string) (report func(rans.Progress), finish func()) {
	done, finish := reportTo(stderr, desc, 0)
	return func(ev rans.Progress) { done(ev.Bytes, ev.TotalBytes) }, finish
}

var (
	compressExpertsCmd = command{name: "compress-experts", npos: 2, what: "<model_dir> <out_dir>", main: compressExperts,
		flags: flagSpec{"--force": false, "--no-verify": false, "--workers": true}, help: expertsUsage + "  -h, --help   this help\n"}
	verifyExpertsCmd = command{name: "verify-experts", npos: 1, what: "<dir>", main: verifyExperts,
		flags: flagSpec{"--workers": true}, help: expertsUsage + "  -h, --help   this help\n"}
)

func compressExperts(a *args, stdout, stderr io.Writer) int {
	workers := a.int("--workers", 0, 1, 4096) // 0: GOMAXPROCS
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	src, dst := a.pos[0], a.pos[1]
	// The first SIGINT or SIGTERM cancels the repack, which removes its spill file and the
	// shard it was writing and writes no manifest, then the process exits 130 or 143; a
	// second signal ends it at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var interrupted atomic.Value
	stop := onSignal(nil, func(s os.Signal) { interrupted.Store(s); cancel() })
	report, finish := expertsProgress(stderr, "k3: coded experts")
	man, err := rans.Repack(src, dst, rans.RepackOptions{Select: selectExperts, Progress: report, Force: a.has("--force"),
		Workers: workers, Context: ctx})
	finish()
	stop()
	if s, ok := interrupted.Load().(os.Signal); ok {
		if err != nil {
			fmt.Fprintf(stderr, "k3: compress-experts: interrupted; %s has no manifest and is not a coded checkpoint\n", dst)
		} else {
			fmt.Fprintf(stderr, "k3: compress-experts: interrupted once %s was complete; it was not verified\n", dst)
		}
		return signalExit(s)
	}
	if err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("compress-experts: %w", err))
	}
	if len(man.Tensors) == 0 {
		fmt.Fprintf(stderr, "k3: compress-experts: warning: %s has no routed-expert weights; the copy has nothing coded\n", src)
	}
	if !a.has("--no-verify") {
		report, finish := expertsProgress(stderr, "k3: verified experts")
		_, err := rans.Verify(dst, rans.VerifyOptions{Progress: report, Workers: workers})
		finish()
		if err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("compress-experts: the written checkpoint does not verify: %w", err))
		}
	}
	dec, stored := man.Totals()
	ratio := 0.0
	if dec > 0 {
		ratio = float64(stored) / float64(dec)
	}
	fmt.Fprintf(stdout, "coded %d expert tensors: %d → %d bytes (%.4f, %.3f bits per 4-bit weight) in %s\n",
		len(man.Tensors), dec, stored, ratio, 8*ratio/2, dst)
	return exitOK
}

func verifyExperts(a *args, stdout, stderr io.Writer) int {
	workers := a.int("--workers", 0, 1, 4096) // 0: GOMAXPROCS
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	report, finish := expertsProgress(stderr, "k3: verified experts")
	rep, err := rans.Verify(a.pos[0], rans.VerifyOptions{Progress: report, Workers: workers})
	finish()
	if err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("verify-experts: %w", err))
	}
	fmt.Fprintf(stdout, "verified %d coded tensors: %d bytes stored, %d decoded, all digests match\n",
		rep.Tensors, rep.RecordBytes, rep.DecodedBytes)
	return exitOK
}
