package main

import (
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

var doctorCmd = command{name: "doctor", flags: flagSpec{"--dir": true, "--probe-mb": true, "--seconds": true},
	help: `usage: k3 doctor [model_dir] [--dir DIR] [--probe-mb N] [--seconds X]

Checks whether and how this machine can run a model:
  memory   MemAvailable and MemTotal, lowered to the cgroup v2 memory.max limit when one applies,
           and the preset that fits (the auto rule of SPEC §11.1 and the largest fixed preset);
  disk     read bandwidth of the model directory's file system measured the way the engine
           reads: 8 MiB 4096-aligned O_DIRECT reads at queue depth 1 and 16, and buffered
           8 MiB reads, on the largest shard (without a model, when every shard is below
           256 MiB or the largest is sparse: a temporary file of --probe-mb in --dir, default the current directory, or
           in the model directory, removed afterwards);
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

// cmdDoctor is `k3 doctor [model_dir]`.
func cmdDoctor(argv []string, stdout, stderr io.Writer) int {
	return doctor(argv, stdout, stderr, sysmem.Read)
}

// doctor reads the machine's memory through readMem (tests give a small machine).
func doctor(argv []string, stdout, stderr io.Writer, readMem func() (sysmem.Info, error)) int {
	a, code, ok := doctorCmd.parse(argv, stdout, stderr)
	if !ok {
		return code
	}
	var err error
	if len(a.pos) > 1 {
		err = usagef("", "expected at most one model directory, got %d positional arguments", len(a.pos))
	}
	probeMB, capSec, dir := 1024, 2.0, "."
	if s, ok := a.vals["--probe-mb"]; ok && err == nil {
		probeMB, err = parseInt("--probe-mb", s, 64, 65536)
	}
	if s, ok := a.vals["--seconds"]; ok && err == nil {
		if capSec, err = parseDecimal("--seconds", s); err == nil && (capSec <= 0 || capSec > 600) {
			err = usagef("--seconds", "%s is outside (0, 600]", s)
		}
	}
	if s, ok := a.vals["--dir"]; ok && err == nil {
		if len(a.pos) == 1 {
			err = usagef("--dir", "measures without a model; with one, its directory is measured")
		}
		dir = s
	}
	if err != nil {
		return doctorCmd.usageFail(stderr, err)
	}
	model := ""
	if len(a.pos) == 1 {
		model = a.pos[0]
	}

	mem, err := readMem()
	if err != nil {
		fail(stderr, fmt.Errorf("doctor: memory: %w", err))
		return exitRuntime
	}
	fmt.Fprintf(stdout, "memory   %s\n", mem)
	fmt.Fprintf(stdout, "         usable by k3: %.2f GB (ceiling %.2f GB)\n", float64(mem.Usable())/gb, float64(mem.Ceiling())/gb)
	suggest := "auto"
	if t, c, err := preset.AutoBudgets(mem); err != nil {
		fmt.Fprintf(stdout, "         auto: %v\n", err)
		suggest = ""
	} else {
		fmt.Fprintf(stdout, "         auto preset here: trunk %.2f GB, cache %.2f GB\n", float64(t)/gb, float64(c)/gb)
	}
	if p, ok := preset.Largest(mem); ok {
		fmt.Fprintf(stdout, "         largest fixed preset that fits: %s\n", p.Name)
	}

	// The model's floor decides whether it can run at all.
	var floorPlan, presetPlan k3.Plan
	var cfg *config.Config
	if model != "" {
		if cfg, err = config.Load(filepath.Join(model, "config.json")); err != nil {
			fail(stderr, err)
			return openExit(err)
		}
		fb := budget{floorTrunk: true, cacheSet: true}
		if err = fb.resolve(model); err == nil {
			floorPlan, err = k3.PlanFor(model, fb.options()...)
		}
		if err != nil {
			fail(stderr, err)
			return openExit(err)
		}
		floor := floorPlan.Total()
		fmt.Fprintf(stdout, "model    %s: %d layers, floor plan %s (trunk %s + expert scratch %s)\n",
			model, cfg.NumLayers, human(floor), human(floorPlan.Trunk.Total), human(floorPlan.Cache.Total))
		if floor > mem.Usable() {
			fmt.Fprintf(stdout, "verdict  this machine cannot run the model: %s usable, the floor needs %s\n",
				human(mem.Usable()), human(floor))
			return exitRuntime
		}
		if suggest == "" {
			suggest = "floor" // auto refuses (the K3-sized reserve) but the model's own floor fits
		}
		presetPlan = floorPlan
		if suggest != "floor" {
			var b budget
			b, err = parseBudget(&args{vals: map[string]string{"--preset": suggest}, at: map[string]int{"--preset": 0}}, func() (sysmem.Info, error) { return mem, nil })
			if err == nil {
				presetPlan, err = k3.PlanFor(model, b.options()...)
			}
		}
		if err != nil && suggest != "floor" {
			// The auto figures are sized for K3; below a small model's floor the floor is the answer.
			if budgetRefused(err) {
				suggest, presetPlan, err = "floor", floorPlan, nil
			}
		}
		if err != nil {
			fail(stderr, err)
			return openExit(err)
		}
	}
	if suggest == "" {
		fmt.Fprintln(stdout, "verdict  too little memory for the K3 presets")
	} else {
		fmt.Fprintf(stdout, "suggest  --preset %s\n", suggest)
	}

	// Disk: the largest shard, or a temporary file.
	target, cleanup, err := probeTarget(model, dir, int64(probeMB)<<20)
	if err != nil {
		fail(stderr, fmt.Errorf("doctor: disk: %w", err))
		return exitRuntime
	}
	defer cleanup()
	limit := time.Duration(capSec * float64(time.Second))
	res := []readrate.Result{readrate.Direct(target, 1, limit, 0), readrate.Direct(target, 16, limit, 0), readrate.Buffered(target, limit)}
	best := 0.0
	for _, r := range res {
		if r.Err != nil {
			fmt.Fprintf(stdout, "disk     %-22s failed: %v\n", r.Method, r.Err)
			continue
		}
		fmt.Fprintf(stdout, "disk     %-22s %9.1f MB/s  (%.2f GB in %.2f s)\n", r.Method, r.MBs(), float64(r.Bytes)/gb, r.Seconds)
		if r.Method != "buffered" {
			best = math.Max(best, r.MBs())
		}
	}
	if model == "" {
		fmt.Fprintf(stdout, "next     k3 doctor <model_dir>   (or k3 synth tiny DIR to try the tool)\n")
		return exitOK
	}
	perTok := bytesPerToken(cfg, presetPlan)
	fmt.Fprintf(stdout, "estimate --preset %s reads %s per token (trunk %s, experts %s)\n",
		suggest, human(perTok.total()), human(perTok.trunk), human(perTok.experts))
	if best > 0 {
		fmt.Fprintf(stdout, "estimate at %.1f MB/s (best direct rate): >= %.4f s/token from I/O alone\n", best, float64(perTok.total())/1e6/best)
	}
	next := fmt.Sprintf("k3 run %s --preset %s --ids 1,2,3 --gen 8", model, suggest)
	if hasTokenizer(model) {
		next = fmt.Sprintf("k3 run %s --preset %s --tok %s --prompt 'Hello' --gen 8", model, suggest, model)
	}
	fmt.Fprintf(stdout, "next     %s\n", next)
	return exitOK
}

// human prints a byte count in MB below a GB, in GB above.
func human(n int64) string {
	if n < 1e9 {
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/gb)
}

type tokenBytes struct{ trunk, experts int64 }

func (t tokenBytes) total() int64 { return t.trunk + t.experts }

// bytesPerToken estimates what one decoded token reads under a plan: the trunk's streamed bytes
// per pass and TopK experts per MoE layer times the miss rate. The miss rate is 1 unless the
// cache holds more than one token's experts; then it is the share of all experts not resident
// (uniform routing, a pessimistic figure for a trained router).
func bytesPerToken(cfg *config.Config, p k3.Plan) tokenBytes {
	var t tokenBytes
	if p.Trunk != nil {
		t.trunk = p.Trunk.StreamBytes
	}
	if p.Cache == nil || cfg == nil {
		return t // experts memory-mapped: the page cache decides
	}
	moeLayers := int64(cfg.NumLayers - cfg.FirstDense)
	need := int64(cfg.TopK) * moeLayers
	miss := 1.0
	if int64(p.Cache.Slots) > need {
		miss = math.Max(0, 1-float64(p.Cache.Slots)/float64(int64(cfg.NumExperts)*moeLayers))
	}
	t.experts = int64(float64(need*p.Cache.ExpertBytes) * miss)
	return t
}

func hasTokenizer(dir string) bool {
	_, e1 := os.Stat(filepath.Join(dir, tokenizer.RanksFileName))
	_, e2 := os.Stat(filepath.Join(dir, tokenizer.ConfigFileName))
	return e1 == nil && e2 == nil
}

// probeTarget returns the file to time: the model's largest shard, or a temporary file on the
// same file system (removed by cleanup) when the shards are too small to time or sparse (a
// synthetic checkpoint's holes read as zeros without touching the device).
func probeTarget(model, dir string, size int64) (string, func(), error) {
	if model != "" {
		best, bestSize := readrate.LargestShard(model)
		if best == "" {
			return "", nil, fmt.Errorf("%s: no *.safetensors shard", model)
		}
		if bestSize >= minShardProbe && !readrate.Sparse(best) {
			return best, func() {}, nil
		}
		dir = model
	}
	name, err := readrate.TempFile(dir, size, probeWriteTime)
	if err != nil {
		return "", nil, err
	}
	return name, func() { os.Remove(name) }, nil
}

// probeWriteTime bounds the writing of the temporary probe file.
const probeWriteTime = 5 * time.Second

// minShardProbe is the smallest shard worth timing; below it doctor writes a temporary file.
const minShardProbe = 256 << 20
