package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/preset"
	"github.com/k3-project/k3/readrate"
	"github.com/k3-project/k3/sysmem"
	"github.com/k3-project/k3/tokenizer"
)

var doctorCmd = command{name: "doctor", npos: -1, main: doctor(sysmem.Read),
	flags: flagSpec{"--dir": true, "--probe-mb": true, "--seconds": true},
	help: `usage: k3 doctor [model_dir] [--dir DIR] [--probe-mb N] [--seconds X]

Checks whether and how this machine can run a model:
  memory   MemAvailable and MemTotal, lowered to the cgroup v2 memory.max limit when one applies,
           and the preset that fits (the auto rule of §11.1 and the largest fixed preset);
  disk     read bandwidth of the model directory's file system measured the way the engine
           reads: 8 MiB 4096-aligned O_DIRECT reads at queue depth 1 and 16, and buffered
           8 MiB reads, on the largest shard (without a model, when every shard is below
           256 MiB or the largest is sparse: a temporary file of --probe-mb in a temporary directory
           made in --dir, default the current directory, or beside the model directory (never in
           it), removed afterwards and by the first SIGINT/SIGTERM);
  estimate with a model: bytes read per token under the suggested preset (trunk bytes streamed
           per pass + TopK × MoE layers × expert bytes × (1 − hit), hit taken as 0 unless the
           cache holds more than one token's experts) over the measured bandwidth: a lower
           bound on s/token from I/O alone (compute comes on top);
and prints the command to run next.

  --dir DIR       where to measure without a model (default .)
  --probe-mb N    size of the temporary file, 64..65536 MB (default 1024; writing stops after
                  5 s once 64 MB are written)
  --seconds X     time cap of each of the three measurements (default 2)
  -h, --help      this help

Exit codes: 0 the model can run (or no model given); 1 it cannot: the memory available is below
the model's floor plan; 2 usage.
`}

// doctor is `k3 doctor [model_dir]`; it reads the machine's memory through readMem (tests give a
// small machine).
func doctor(readMem func() (sysmem.Info, error)) func(a *args, stdout, stderr io.Writer) int {
	return func(a *args, stdout, stderr io.Writer) int {
		if len(a.pos) > 1 {
			a.check(usagef("", "expected at most one model directory, got %d positional arguments", len(a.pos)))
		}
		probeMB := a.int("--probe-mb", 1024, 64, 65536)
		capSec := a.decimal("--seconds", 2)
		if a.err == nil && (capSec <= 0 || capSec > 600) {
			a.check(usagef("--seconds", "%s is outside (0, 600]", a.vals["--seconds"]))
		}
		if a.has("--dir") && len(a.pos) == 1 {
			a.check(usagef("--dir", "measures without a model; with one, its directory is measured"))
		}
		if a.err != nil {
			return a.usage(stderr, a.err)
		}
		model := ""
		if len(a.pos) == 1 {
			model = a.pos[0]
		}

		mem, err := readMem()
		if err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("doctor: memory: %w", err))
		}
		fmt.Fprintf(stdout, "memory   %s\n", mem)
		fmt.Fprintf(stdout, "         usable by k3: %s (ceiling %s)\n", size(mem.Usable()), size(mem.Ceiling()))
		suggest := preset.Auto
		if t, c, err := preset.AutoBudgets(mem); err != nil {
			fmt.Fprintf(stdout, "         auto: %v\n", err)
			suggest = ""
		} else {
			fmt.Fprintf(stdout, "         auto preset here: trunk %s, cache %s\n", size(t), size(c))
		}
		if p, ok := preset.Largest(mem); ok {
			fmt.Fprintf(stdout, "         largest fixed preset that fits: %s\n", p.Name)
		}

		// The model's floor decides whether it can run at all.
		var plan k3.Plan
		var cfg *config.Config
		if model != "" {
			cfg, err = config.Load(filepath.Join(model, "config.json"))
			var s preset.Suggestion
			if err == nil {
				s, err = preset.Suggest(model, mem)
			}
			if err != nil {
				return failed(stderr, openExit(err), err)
			}
			fmt.Fprintf(stdout, "model    %s: %d layers, floor plan %s (trunk %s + expert scratch %s)\n",
				model, cfg.NumLayers, size(s.Floor.Total()), size(s.Floor.Trunk.Total), size(s.Floor.Cache.Total))
			if s.Name == "" {
				fmt.Fprintf(stdout, "verdict  this machine cannot run the model: %s usable, the floor needs %s\n",
					size(mem.Usable()), size(s.Floor.Total()))
				return exitRuntime
			}
			suggest, plan = s.Name, s.Plan
		}
		if suggest == "" {
			fmt.Fprintln(stdout, "verdict  too little memory for the K3 presets")
		} else {
			fmt.Fprintf(stdout, "suggest  --preset %s\n", suggest)
		}

		// Disk: the largest shard, or a temporary file on the same file system.
		target, remove, err := diskTarget(model, cmp.Or(a.vals["--dir"], "."), int64(probeMB)<<20, stderr)
		if err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("doctor: disk: %w", err))
		}
		defer remove()
		limit := time.Duration(capSec * float64(time.Second))
		best := 0.0
		for _, r := range []readrate.Result{readrate.Direct(target, 1, limit, 0), readrate.Direct(target, 16, limit, 0), readrate.Buffered(target, limit)} {
			if r.Err != nil {
				fmt.Fprintf(stdout, "disk     %-22s failed: %v\n", r.Method, r.Err)
				continue
			}
			fmt.Fprintf(stdout, "disk     %-22s %9.1f MB/s  (%s in %.2f s)\n", r.Method, r.MBs(), size(r.Bytes), r.Seconds)
			if r.Method != "buffered" {
				best = math.Max(best, r.MBs())
			}
		}
		if model == "" {
			fmt.Fprintf(stdout, "next     k3 doctor <model_dir>   (or k3 synth tiny DIR to try the tool)\n")
			return exitOK
		}
		t, e := preset.TokenReads(cfg, plan)
		fmt.Fprintf(stdout, "estimate --preset %s reads %s per token (trunk %s, experts %s)\n",
			suggest, size(t+e), size(t), size(e))
		if best > 0 {
			fmt.Fprintf(stdout, "estimate at %.1f MB/s (best direct rate): >= %.4f s/token from I/O alone\n", best, float64(t+e)/1e6/best)
		}
		next := fmt.Sprintf("k3 run %s --preset %s --ids 1,2,3 --gen 8", model, suggest)
		if tokenizer.InDir(model) {
			next = fmt.Sprintf("k3 run %s --preset %s --tok %s --prompt 'Hello' --gen 8", model, suggest, model)
		}
		fmt.Fprintf(stdout, "next     %s\n", next)
		return exitOK
	}
}

// probeWriteTime bounds the writing of the temporary probe file.
const probeWriteTime = 5 * time.Second

// diskTarget is the file doctor measures: the model's largest shard when readrate can time it,
// otherwise a probe file written in a temporary directory of its own, made in dir or, with a
// model, beside the model's directory (the same file system unless the model directory is a
// mount point; nothing is written inside a model). remove deletes that directory; so does the
// first SIGINT or SIGTERM until then, which then ends the process (128 + the signal), so an
// interrupted doctor leaves no probe behind.
func diskTarget(model, dir string, size int64, stderr io.Writer) (target string, remove func(), err error) {
	if model != "" {
		shard, shardSize := readrate.LargestShard(model)
		if shard == "" {
			return "", nil, fmt.Errorf("%s: no *.safetensors shard", model)
		}
		if shardSize >= readrate.MinShard && !readrate.Sparse(shard) {
			return shard, func() {}, nil
		}
		abs, err := filepath.Abs(model)
		if err != nil {
			return "", nil, err
		}
		dir = filepath.Dir(abs)
	}
	tmp, err := os.MkdirTemp(dir, ".k3-doctor-*")
	if err != nil {
		return "", nil, fmt.Errorf("the probe directory: %w", err)
	}
	// removeAll retries: a probe file being created while the directory is removed makes the
	// first attempt find it not empty.
	removeAll := func() {
		for range 5 {
			if os.RemoveAll(tmp) == nil {
				return
			}
		}
	}
	stop := onSignal(nil, func(s os.Signal) {
		removeAll()
		fmt.Fprintf(stderr, "k3: doctor: interrupted (%v); the probe is removed\n", s)
		os.Exit(signalExit(s))
	})
	remove = func() {
		stop()
		removeAll()
	}
	target, err = readrate.TempFile(tmp, size, probeWriteTime)
	if err != nil {
		remove()
		return "", nil, err
	}
	return target, remove, nil
}
