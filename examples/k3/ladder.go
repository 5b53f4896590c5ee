package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/preset"
	"github.com/k3-project/k3/readrate"
)

var ladderCmd = command{name: "ladder", npos: 1, what: "exactly one model directory", main: ladder,
	flags: flagSpec{"--budgets": true, "--ids": true, "--gen": true, "--threads": true, "--trunk": true,
		"--trunk-slot-mb": true, "--cache-gb": true, "--out": true, "--plot": true}, help: `usage: k3 ladder <model_dir> --budgets LIST [flags]

Runs "k3 run" once per trunk budget, each in its own process, and prints one row per budget:
plan, pinned layers, ring slots, peak RSS, s/token, trunk bytes read per token, stream rate,
overlap, and whether every rung generated identical ids. Each rung's progress (its plan, its
tokens, long forward passes) is shown on stderr while it runs, prefixed with the rung.

  --budgets LIST       comma-separated decimal GB, or floor, all, mapped (required)
  --ids LIST           prompt ids (default 1008,10484,318,15383,387, a K3 prompt, when every one
                       lies in the model's vocabulary; otherwise 1,2,3,4,5)
  -n, --gen N          tokens per rung, 1..4096 (default 8)
  -t, --threads N      worker goroutines per rung
  --trunk DIR          packed trunk (k3 pack-trunk)
  --trunk-slot-mb X    largest piece streamed per slot in MB
  --cache-gb X         the same expert cache on every rung (0: read every expert, keep none;
                       default: experts memory-mapped)
  --out FILE           JSON of the rungs
  --plot FILE.svg      draw s/token and peak RSS against the trunk budget (.svg or .png)
  -h, --help           this help
`}

// rung is one row of the memory ladder: one budget, run in its own process.
type rung struct {
	Budget         string  `json:"budget"`
	BudgetBytes    int64   `json:"budget_bytes"`
	PlanTotal      int64   `json:"plan_total_bytes"`
	Pinned         int     `json:"pinned_layers"`
	Layers         int     `json:"layers"`
	HeadPinned     bool    `json:"head_pinned"`
	Slots          int     `json:"ring_slots"`
	PeakRSS        int64   `json:"peak_rss_bytes"`
	RSSFile        int64   `json:"rss_file_bytes"` // file-backed pages at the end (mapped shards: the experts)
	SecondsPerTok  float64 `json:"seconds_per_token"`
	ReadPerToken   int64   `json:"trunk_bytes_read_per_token"` // layers + head + embedding rows
	StreamMBs      float64 `json:"stream_mb_per_s"`            // bytes read ÷ device seconds
	Overlap        float64 `json:"overlap"`
	GeneratedIDs   []int   `json:"generated_ids"`
	WallSeconds    float64 `json:"wall_seconds"`
	RunError       string  `json:"error,omitempty"`
	StoreReadMode  string  `json:"read_mode,omitempty"`
	TrunkBytesRead int64   `json:"trunk_bytes_read"`
}

// ladder runs `run` once per budget, each in its own process, and prints the table.
func ladder(a *args, stdout, stderr io.Writer) int {
	if a.vals["--budgets"] == "" {
		a.check(usagef("--budgets", "ladder needs --budgets LIST (decimal GB, floor, all or mapped)"))
	}
	budgets := strings.Split(a.vals["--budgets"], ",")
	for _, b := range budgets {
		if b != "floor" && b != "all" && b != "mapped" && a.err == nil {
			_, a.err = parseGB("--budgets", b)
		}
	}
	ids := a.vals["--ids"]
	if a.err == nil && ids != "" {
		_, a.err = parseIDList("--ids", ids, maxPrompt)
	}
	gen := strconv.Itoa(a.int("--gen", 8, 1, maxGen))
	a.int("--threads", 0, 1, 4096) // checked here; the rungs get it as given
	plotPath := a.plotPath()
	if a.err == nil { // before any rung runs, so that no rung's work is lost to an unwritable file
		a.check(writable("--out", a.vals["--out"]))
	}
	// The budget flags are checked as run checks them, and the trunk-shape ones decide the floor.
	shape := parseBudget(a).trunk
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	dir := a.pos[0]
	if ids == "" {
		cfg, err := config.Load(filepath.Join(dir, "config.json"))
		if err != nil {
			return failed(stderr, openExit(err), err)
		}
		ids = defaultLadderIDs(cfg.Vocab)
		fmt.Fprintf(stderr, "ladder: prompt ids %s (the default for a vocabulary of %d; --ids to choose)\n", ids, cfg.Vocab)
	}
	var same []string // the flags every rung runs with
	for _, f := range []string{"--trunk", "--cache-gb", "--trunk-slot-mb", "--threads"} {
		if v, ok := a.vals[f]; ok {
			same = append(same, f, v)
		}
	}
	floor, err := preset.FloorBudget(dir, shape...)
	var full int64
	if err == nil {
		full, err = preset.FullBudget(dir, shape...)
	}
	if err != nil {
		return failed(stderr, exitRuntime, err)
	}
	self, err := os.Executable()
	var tmp string
	if err == nil {
		tmp, err = os.MkdirTemp("", "k3-ladder-")
	}
	if err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("ladder: %w", err))
	}
	defer os.RemoveAll(tmp)

	devBefore := deviceMBs(dir)
	var rows []rung
	for i, b := range budgets {
		r := rung{Budget: b}
		args := []string{"run", dir, "--ids", ids, "--gen", gen, "--incremental", "--no-stop"}
		switch b {
		case "mapped":
		case "floor":
			r.BudgetBytes = floor
		case "all":
			r.BudgetBytes = full
		default:
			r.BudgetBytes, _ = parseGB("--budgets", b)
		}
		if b != "mapped" {
			args = append(args, "--trunk-gb", strconv.FormatFloat(float64(r.BudgetBytes)/1e9, 'f', -1, 64))
		}
		out := filepath.Join(tmp, fmt.Sprintf("rung%d.json", i))
		args = append(append(args, same...), "--out", out)
		fmt.Fprintf(stderr, "ladder: rung %d/%d: %s\n", i+1, len(budgets), strings.Join(args, " "))
		r.run(self, args, out, &prefixLines{w: stderr, prefix: fmt.Sprintf("  rung %d/%d: ", i+1, len(budgets))})
		rows = append(rows, r)
	}
	dev := [2]float64{devBefore, deviceMBs(dir)}
	printLadder(stdout, rows, dev, gen)
	if p := a.vals["--out"]; p != "" {
		if err := writeJSON(p, stdout, struct {
			Rungs     []rung     `json:"rungs"`
			DirectMBs [2]float64 `json:"device_direct_mb_per_s_before_after"`
		}{rows, dev}); err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("--out: %w", err))
		}
	}
	if plotPath != "" {
		if err := plotLadder(rows, plotPath, dir); err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("ladder: --plot: %w", err))
		}
		fmt.Fprintf(stderr, "k3: ladder: chart written to %s\n", plotPath)
	}
	if !identical(rows) {
		return exitRuntime
	}
	return exitOK
}

// identical reports whether every rung ran and emitted the first one's ids.
func identical(rows []rung) bool {
	for _, r := range rows {
		if r.RunError != "" || !slices.Equal(r.GeneratedIDs, rows[0].GeneratedIDs) {
			return false
		}
	}
	return true
}

// defaultLadderIDs is the ladder's prompt when --ids is not given: a prompt of the real K3 (so
// the rungs of a K3 ladder are comparable with earlier ones) when it fits the vocabulary, and
// the first ids otherwise, so that a smaller model's rungs run instead of each failing on an id
// it does not have.
func defaultLadderIDs(vocab int) string {
	k3Prompt := []int{1008, 10484, 318, 15383, 387}
	if slices.Max(k3Prompt) < vocab {
		return "1008,10484,318,15383,387"
	}
	return "1,2,3,4,5"
}

// prefixLines copies a rung's stderr line by line, each prefixed, so that its progress shows
// while it runs.
type prefixLines struct {
	w       io.Writer
	prefix  string
	partial []byte
}

func (p *prefixLines) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.partial[:i])
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

// run runs the rung's process, showing its stderr on progress, and reads its report from out.
func (r *rung) run(self string, args []string, out string, progress io.Writer) {
	cmd := exec.Command(self, args...)
	var errOut strings.Builder
	cmd.Stderr = io.MultiWriter(&errOut, progress)
	t0 := time.Now()
	err := cmd.Run()
	r.WallSeconds = time.Since(t0).Seconds()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		r.RunError = fmt.Sprintf("%v: %s", err, lines[len(lines)-1])
	} else if err := r.load(out); err != nil {
		r.RunError = err.Error()
	}
}

// load reads the figures of the rung from its run report.
func (r *rung) load(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return err
	}
	if rep.Error != "" {
		return errors.New(rep.Error)
	}
	r.GeneratedIDs, r.PeakRSS, r.RSSFile = rep.GeneratedIDs, rep.PeakRSSBytes, rep.RSSFileBytes
	if rep.SecondsPerToken != nil {
		r.SecondsPerTok = *rep.SecondsPerToken
	}
	r.PlanTotal, r.Layers = rep.Plan.Total(), -1
	if p := rep.Plan.Trunk; p != nil {
		r.Pinned, r.Layers, r.HeadPinned, r.Slots = len(p.Pinned), p.Layers, p.HeadPinned, p.Slots
	}
	if st := rep.Trunk; st != nil {
		r.TrunkBytesRead, r.StreamMBs, r.Overlap, r.StoreReadMode = st.TotalBytes(), st.StreamMBs(), st.Overlap(), st.Mode
		r.ReadPerToken = r.TrunkBytesRead / int64(max(1, len(r.GeneratedIDs)))
	}
	return nil
}

func printLadder(w io.Writer, rows []rung, dev [2]float64, gen string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "budget\tplan total\tpinned\tslots\tpeak RSS\tmapped (experts)\toverhead\ts/token\tread/token\tstream MB/s\toverlap\tids\t")
	for _, r := range rows {
		pinned := "mapped"
		if r.Layers >= 0 {
			pinned = fmt.Sprintf("%d/%d%s", r.Pinned, r.Layers, map[bool]string{true: "+head"}[r.HeadPinned])
		}
		ids := fmt.Sprint(r.GeneratedIDs)
		if r.RunError != "" {
			ids = "ERROR: " + r.RunError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%.3f\t%s\t%.0f\t%.0f%%\t%s\t\n", r.Budget, size(r.PlanTotal), pinned, r.Slots,
			size(r.PeakRSS), size(r.RSSFile), size(r.overhead()), r.SecondsPerTok, size(r.ReadPerToken), r.StreamMBs, 100*r.Overlap, ids)
	}
	tw.Flush()
	fmt.Fprintf(w, "device O_DIRECT read bandwidth (8 MiB reads, 4 in flight, before/after the rungs): %.0f / %.0f MB/s\n", dev[0], dev[1])
	if identical(rows) {
		fmt.Fprintf(w, "VERDICT: all %d rungs emitted identical ids (%s tokens each)\n", len(rows), gen)
	} else {
		fmt.Fprintf(w, "VERDICT: rungs DIFFER or failed\n")
	}
	var worst int64
	var floor, all *rung
	for i, r := range rows {
		if r.RunError == "" && r.Layers >= 0 {
			worst = max(worst, r.overhead())
		}
		switch r.Budget {
		case "floor":
			floor = &rows[i]
		case "all":
			all = &rows[i]
		}
	}
	fmt.Fprintf(w, "overhead = peak RSS − plan total − mapped pages (session state, activations, Go runtime): at most %s on the budgeted rungs\n", size(worst))
	if floor != nil && all != nil && all.PeakRSS > 0 {
		fmt.Fprintf(w, "floor peak RSS is %.1f%% of the all-resident rung's\n", 100*float64(floor.PeakRSS)/float64(all.PeakRSS))
	}
}

// overhead is what the process held beyond the planned dense weights and the mapped shard
// pages: per-session state, activations, scratch and the Go runtime.
func (r *rung) overhead() int64 { return r.PeakRSS - r.PlanTotal - r.RSSFile }

// deviceMBs measures the O_DIRECT read bandwidth of the model's largest shard the way the
// trunk store reads: 8 MiB aligned reads, 4 in flight, at most 2 GB.
func deviceMBs(dir string) float64 {
	path, _ := readrate.LargestShard(dir)
	if path == "" {
		return 0
	}
	return readrate.Direct(path, 4, 0, 2e9).MBs()
}
