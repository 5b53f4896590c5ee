package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/atomicfile"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/sample"
	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/trunk"
)

// Limits of §11.1.
const (
	maxPrompt = 32768
	maxGen    = 4096
	maxTotal  = 36864
)

var runCmd = command{name: "run", npos: -1, main: runMain, flags: merge(budgetFlags, genFlags, flagSpec{
	"--ids": true, "--prompt": true, "--prompt-file": true, "--tok": true, "--gen": true,
	"--incremental": false, "--full-recompute": false, "--threads": true, "--stop-ids": true,
	"--no-stop": false, "--out": true, "--dump-logits": true, "--tf-check": false,
	"--dump-cache-trace": true, "--verify": false, "--quiet": false, "--verbose": false,
	"--interactive": false,
}), help: `usage: k3 run <model_dir> [flags]   (or k3 <model_dir> [flags])

Continues the prompt on the CPU and writes the generated text to stdout as it is produced
(exactly the text: not the prompt, no newline added; a character split across tokens is
written once it is whole). Without a tokenizer, stdout is the generated ids, comma separated.
The plan, progress and summary go to stderr. Flags apply in argv order (later wins); llama.cpp's
spellings are accepted where two are listed.

  -p, --prompt TEXT  prompt text, encoded as the Kimi reference does (special names become their
                     ids; no chat template, nothing added); at most 1 MiB
  -f, --prompt-file PATH, --file PATH
                     prompt text read from a UTF-8 file, "-" for standard input; at most 1 MiB
  --ids LIST         prompt token ids, comma separated, no spaces ("1,2,3")
                     (exactly one of --prompt, --prompt-file, --ids is required, except with -i)
  --tok DIR          Kimi tokenizer directory (tiktoken.model + tokenizer_config.json); default:
                     the model directory when it holds both files
  -n, --n-predict N, --gen N
                     tokens to generate, 0..4096 (default 8)
  -i, --interactive  a conversation on one session: each line typed continues it (k3 chat)
  -q, --quiet        no diagnostics on stderr (errors and warnings still are)
  -v, --verbose      one line per token on stderr (index, id, seconds, hit rate, bytes read,
                     text) even on a terminal; written by default when stderr is not a terminal
  --full-recompute   recompute the whole sequence every step (slow; for checks). The default is
                     incremental decoding (KDA state, conv tails and the MLA latent cache carried);
                     --incremental is accepted and changes nothing
  -t, --threads N    worker goroutines, >= 1 (default: GOMAXPROCS)
  --stop-ids LIST    stop after emitting any of these ids, each in [0, vocab) (default: the
                     tokenizer's [EOS] and <|end_of_msg|> when there is a tokenizer, plus the
                     config's eos_token_id; ids outside the vocabulary are left out of the default)
  --no-stop          never stop early
  --out FILE         write the JSON report to FILE ("-": stdout, instead of the text); without
                     --out no report is written
  --dump-logits FILE write the step-0 logits as little-endian float32 x vocab
  --tf-check         teacher-forced agreement over --ids instead of generating
  --verify           check every tensor against its colibri.sha256 digest at open (re-reads
                     every byte of the checkpoint once)
  --dump-cache-trace DIR  write expert_trace.bin and expert_hist.json (§9.7)
  -h, --help         this help (anywhere on the command line)

--out, --dump-logits and --save-state are checked for writability before any weights load.
Exit codes: 0 ok; 2 usage error, invalid config, id outside the vocabulary, unwritable output,
a budget below the model's floor (the message gives the floor);
1 runtime failure (open, bind, forward, tokenizer); 4 a routed expert failed to load;
130/143 interrupted (the report is still written).

` + budgetUsage + "\n" + genUsage}

// runOptions is a validated decode request.
type runOptions struct {
	modelDir    string
	ids         []int
	promptText  string // --prompt or the contents of --prompt-file; encoded once --tok is loaded
	promptFlag  string // the prompt source: "--ids", "--prompt" or "--prompt-file"
	tokDir      string
	gen         int
	incremental bool
	threads     int
	stop        []int
	stopGiven   bool
	noStop      bool
	out         string
	dumpLogits  string
	tfCheck     bool
	verify      bool   // --verify
	traceDir    string // --dump-cache-trace
	quiet       bool   // -q: diagnostics discarded
	verbose     bool   // -v: the per-token table even on a terminal
	interactive bool   // -i or k3 chat
	budget      budget
	gf          genOptions // genflags.go
}

func parseRun(a *args) (*runOptions, error) {
	if len(a.pos) != 1 {
		return nil, usagef("", "expected exactly one model directory, got %d positional arguments", len(a.pos))
	}
	o := &runOptions{modelDir: a.pos[0], verify: a.has("--verify"), traceDir: a.vals["--dump-cache-trace"],
		quiet: a.has("--quiet"), verbose: a.has("--verbose"), interactive: a.has("--interactive")}
	if err := o.parsePrompt(a.vals); err != nil {
		return nil, err
	}
	if o.interactive && a.has("--tf-check") {
		a.check(usagef("--tf-check", "conflicts with interactive mode"))
	}
	o.budget = parseBudget(a)
	o.gen = a.int("--gen", 8, 0, maxGen)
	o.threads = a.int("--threads", runtime.GOMAXPROCS(0), 1, 4096)
	o.incremental = a.last("--incremental", "--full-recompute") != "--full-recompute"
	o.noStop, o.tfCheck = a.has("--no-stop"), a.has("--tf-check")
	if o.stopGiven = a.has("--stop-ids"); o.stopGiven && o.noStop {
		a.check(usagef("--stop-ids", "conflicts with --no-stop"))
	}
	o.stop = get(a, "--stop-ids", nil, func(flag, s string) ([]int, error) { return parseIDList(flag, s, 1024) })
	o.gf = parseGenFlags(a, o.incremental, o.tokDir)
	if o.ids != nil && a.err == nil {
		a.check(o.checkLengths())
	}
	if s, ok := a.vals["--out"]; ok {
		o.out = s
	}
	if o.dumpLogits = a.vals["--dump-logits"]; o.dumpLogits == "-" {
		a.check(usagef("--dump-logits", "binary logits cannot go to stdout; give a file"))
	}
	return o, a.err
}

// parsePrompt takes exactly one prompt source (none in interactive mode is allowed: the first
// line typed is the prompt). The tokenizer is --tok's, or the model directory's when it holds
// one; text sources need one, and with one the output of --ids is decoded and the tokenizer's
// stop ids apply.
func (o *runOptions) parsePrompt(vals map[string]string) error {
	o.tokDir = vals["--tok"]
	if o.tokDir == "" && tokenizer.InDir(o.modelDir) {
		o.tokDir = o.modelDir
	}
	given := slices.DeleteFunc([]string{"--ids", "--prompt", "--prompt-file"}, func(f string) bool { _, ok := vals[f]; return !ok })
	switch len(given) {
	case 0:
		if o.interactive {
			return nil
		}
		return usagef("--prompt", "a prompt is required (one of -p/--prompt, -f/--prompt-file, --ids)")
	case 1:
	default:
		return usagef(given[1], "conflicts with %s: give exactly one of --prompt, --prompt-file, --ids", given[0])
	}
	o.promptFlag = given[0]
	var err error
	switch o.promptFlag {
	case "--ids":
		o.ids, err = parseIDList("--ids", vals["--ids"], maxPrompt)
		return err
	case "--prompt":
		if o.promptText = vals["--prompt"]; len(o.promptText) > maxPromptBytes {
			return usagef("--prompt", "%d bytes, at most %d", len(o.promptText), maxPromptBytes)
		}
	case "--prompt-file":
		path := vals["--prompt-file"]
		if path == "-" && o.interactive {
			return usagef("--prompt-file", "standard input carries the conversation in interactive mode")
		}
		if o.promptText, err = readPromptFile(path); err != nil {
			return err
		}
	}
	if o.tokDir == "" {
		return usagef(o.promptFlag, "a text prompt needs --tok DIR (%s holds no %s and %s)", o.modelDir, tokenizer.RanksFileName, tokenizer.ConfigFileName)
	}
	return nil
}

// checkVocab refuses prompt and stop ids outside the model's vocabulary [0, vocab) (§4.2:
// an error, never clamped; a stop id the model cannot emit would silently never stop).
func (o *runOptions) checkVocab(vocab int) error {
	for i, id := range o.ids {
		if id >= vocab {
			return usagef(o.promptFlag, "element %d: id %d is outside the vocabulary [0, %d)", i, id, vocab)
		}
	}
	for i, id := range o.stop {
		if id >= vocab {
			return usagef("--stop-ids", "element %d: id %d is outside the vocabulary [0, %d)", i, id, vocab)
		}
	}
	return nil
}

// checkOutputs makes sure the report, the logits dump and the state can be written before
// anything is loaded, so a long run never ends with its results lost.
func (o *runOptions) checkOutputs() error {
	if o.interactive && (o.out != "" || o.dumpLogits != "" || o.gf.saveState != "" || o.gf.loadState != "" || !o.incremental) {
		return usagef("--interactive", "--out, --dump-logits, --save-state, --load-state and --full-recompute are for one run (use /save and /load)")
	}
	if o.gf.saveState == "-" {
		return usagef("--save-state", "a state cannot go to stdout; give a file")
	}
	for _, c := range []struct{ flag, path string }{
		{"--out", o.out}, {"--dump-logits", o.dumpLogits}, {"--save-state", o.gf.saveState},
	} {
		if err := writable(c.flag, c.path); err != nil {
			return err
		}
	}
	return nil
}

// writable is a usage error naming flag when path cannot be written as the writers write it
// ("" and "-", stdout, can): every output goes to a temporary file beside path renamed over it,
// so what is checked is that one can be created in path's directory (and removed again), and
// that path is not a directory or a special file that a rename would replace.
func writable(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usagef(flag, "%s is a directory", path)
	} else if err == nil && !st.Mode().IsRegular() {
		return usagef(flag, "%s is not a regular file (%v); outputs replace the file", path, st.Mode().Type())
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return usagef(flag, "%s cannot be written: %v", path, err)
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil {
		return usagef(flag, "%v", err)
	}
	return nil
}

// openExit maps a failure to read the model to an exit code: a configuration that cannot be
// trusted and a budget below the model's floor are validation errors (2, §11.1); anything
// else (missing files, bind) is 1.
func openExit(err error) int {
	if _, ok := errors.AsType[*config.ConfigError](err); ok {
		return exitUsage
	}
	if errors.Is(err, config.ErrInvalidJSON) || errors.Is(err, config.ErrTooLarge) || budgetRefused(err) ||
		errors.Is(err, config.ErrTooFewTensors) || errors.Is(err, checkpoint.ErrExtraLayers) {
		return exitUsage
	}
	return exitRuntime
}

// checkLengths applies the limits of §11.1 once the prompt ids are known.
func (o *runOptions) checkLengths() error {
	if len(o.ids)+o.gen+1 > maxTotal {
		return usagef("--gen", "prompt (%d) + gen (%d) + 1 exceeds %d", len(o.ids), o.gen, maxTotal)
	}
	if len(o.ids) >= o.gf.ctx {
		return usagef("--ctx-size", "the prompt's %d ids leave no room in a context of %d", len(o.ids), o.gf.ctx)
	}
	if o.tfCheck && len(o.ids) < 2 {
		return usagef("--tf-check", "needs at least 2 ids")
	}
	return nil
}

// report is the JSON object of §11.1, limited to the keys this engine can fill today.
type report struct {
	ModelDir        string       `json:"model_dir"`
	PromptIDs       []int        `json:"prompt_ids"`
	GeneratedIDs    []int        `json:"generated_ids"`
	FullIDs         []int        `json:"full_ids"`
	Layers          int          `json:"layers"`
	LayersRequested int          `json:"layers_requested"`
	LayersCompleted int          `json:"layers_completed"`
	Incremental     bool         `json:"incremental"`
	Threads         int          `json:"threads"`
	StopIDs         []int        `json:"stop_ids"`
	StopReason      string       `json:"stop_reason"`
	ExpertDrops     int          `json:"expert_drops"`
	PeakRSSBytes    int64        `json:"peak_rss_bytes"`
	RSSFileBytes    int64        `json:"rss_file_bytes"` // file-backed pages resident at the end (mapped shards)
	WallSeconds     float64      `json:"wall_seconds"`
	LoadSeconds     float64      `json:"load_seconds"`
	SecondsPerToken *float64     `json:"seconds_per_token"` // null when nothing was generated
	TrunkBytesRead  int64        `json:"trunk_bytes_read"`
	EmbedBytesRead  int64        `json:"embedding_bytes_read"`
	HeadBytesRead   int64        `json:"lm_head_bytes_read"`
	ExpertBytesRead int64        `json:"expert_bytes_read"`
	Cache           *cache.Stats `json:"cache_stats,omitempty"`
	Plan            k3.Plan      `json:"plan"`
	Trunk           *trunk.Stats `json:"trunk_stats,omitempty"`
	UltraLowMemory  bool         `json:"ultra_low_memory"` // never: this engine has no such mode
	GeneratedText   *string      `json:"generated_text"`   // the complete decoded text; null without --tok
	Error           string       `json:"error,omitempty"`

	Generation *genReport `json:"generation"` // genflags.go
}

// runMain is `k3 run <model_dir>` (and `k3 <model_dir>`).
func runMain(a *args, stdout, stderr io.Writer) int {
	o, err := parseRun(a)
	if err == nil {
		err = o.checkOutputs()
	}
	if err != nil {
		return a.usage(stderr, err)
	}
	return decode(o, stdout, stderr, nil)
}

// decode runs a validated request. sigs, when non-nil, replaces the process signal channel
// (tests).
func decode(o *runOptions, stdout, stderr io.Writer, sigs chan os.Signal) int {
	start := time.Now()
	// The first SIGINT/SIGTERM lets the token in flight finish, stops generation and still writes
	// the report; a second one kills the process. The forward pass itself is not cancelled, so no
	// computed work is thrown away. While the model is being opened there is no token to finish
	// and an open may wait on a slow or stuck file system: the first signal then ends the process
	// at once (128 + the signal), removing the trace dump's temporary file, so it is never
	// ignored. Tests that inject signals (sigs non-nil) always take the first path.
	var gotSig atomic.Value
	var opening atomic.Bool
	var openingDump atomic.Pointer[traceDump]
	if !o.interactive { // the interactive mode handles every Ctrl-C itself (converse)
		opening.Store(sigs == nil)
		defer onSignal(sigs, func(s os.Signal) {
			gotSig.Store(s)
			if opening.Load() {
				if d := openingDump.Load(); d != nil {
					d.abort()
				}
				fmt.Fprintf(stderr, "k3: %v while opening the model: stopped\n", s)
				os.Exit(signalExit(s))
			}
		})()
	}
	defer opening.Store(false)
	interrupted := func() os.Signal { s, _ := gotSig.Load().(os.Signal); return s }
	ctx := context.Background()
	info := stderr // diagnostics; -q discards them, errors and warnings still go to stderr
	if o.quiet {
		info = io.Discard
	}

	var enc *tokenizer.Encoding
	if o.tokDir != "" {
		var err error
		if enc, err = loadTokenizer(o.tokDir, stderr); err != nil {
			return failed(stderr, exitRuntime, err)
		}
		if o.ids == nil && o.promptFlag != "" { // interactive mode may start without a prompt
			if o.ids, err = encodePrompt(enc, o.promptFlag, o.promptText); err == nil {
				err = o.checkLengths()
			}
			if err != nil {
				return failed(stderr, exitUsage, err)
			}
			fmt.Fprintf(info, "k3: %s: %d prompt ids\n", o.promptFlag, len(o.ids))
		}
	}

	// The configuration is read and validated before any weights: a config that cannot be
	// trusted and ids outside its vocabulary are refused (exit 2) without touching the shards.
	cfg, err := config.Load(o.budget.config(o.modelDir))
	if err != nil {
		return failed(stderr, openExit(err), err)
	}
	if o.budget.layers > cfg.NumLayers {
		return usageFail(stderr, "run", usagef("--layers", "%d is more than the configuration's %d layers", o.budget.layers, cfg.NumLayers))
	}
	if err := o.checkVocab(cfg.Vocab); err != nil {
		return failed(stderr, exitUsage, err)
	}
	stop := o.stop
	if !o.stopGiven && !o.noStop {
		var dropped []int
		if stop, dropped = k3.DefaultStop(enc, cfg); len(dropped) > 0 {
			fmt.Fprintf(info, "k3: note: default stop ids %v are outside the vocabulary [0, %d) and cannot occur\n", dropped, cfg.Vocab)
		}
	}

	if err := o.budget.resolve(o.modelDir); err != nil {
		return failed(stderr, openExit(err), err)
	}
	if o.budget.codedNote != "" {
		fmt.Fprintln(info, o.budget.codedNote)
	}
	opts := append(o.budget.options(), k3.WithThreads(o.threads))
	if o.verify {
		opts = append(opts, k3.WithVerify())
	}
	// A forward pass longer than passQuiet shows its layers (the trace file, if any, hears the
	// same events).
	var tr tracers
	if !o.quiet {
		tr = append(tr, &passProgress{w: stderr, layers: cmp.Or(o.budget.layers, cfg.NumLayers), quiet: passQuiet})
	}
	var dump *traceDump
	if o.traceDir != "" {
		var err error
		if dump, err = startTraceDump(o.traceDir, cfg); err != nil {
			return failed(stderr, exitUsage, err)
		}
		tr = append(tr, dump.w)
		defer dump.abort() // a run that ends early leaves no trace that looks complete
		openingDump.Store(dump)
	}
	if len(tr) > 0 {
		opts = append(opts, k3.WithTracer(tr))
	}
	// The plan is computed and printed before anything is allocated.
	plan, err := k3.PlanFor(o.modelDir, opts...)
	if err != nil {
		return failed(stderr, openExit(err), err)
	}
	dump.expertBytes(plan)
	fmt.Fprintf(info, "k3: memory plan\n  %s\n", strings.ReplaceAll(plan.String(), "\n", "\n  "))
	defer o.budget.lowGC()()
	m, err := k3.Open(o.modelDir, opts...)
	opening.Store(false) // from here the first signal stops generation after the token in flight
	if err != nil {
		return failed(stderr, openExit(err), err)
	}
	defer m.Close()
	for _, w := range m.Warnings() {
		fmt.Fprintf(stderr, "k3: warning: %s\n", w)
	}
	if c := m.Config(); c.Vocab != cfg.Vocab {
		return failed(stderr, exitRuntime, fmt.Errorf("%s: config.json changed while loading (vocab %d, then %d)", o.modelDir, cfg.Vocab, c.Vocab))
	}
	o.budget.settle()
	loadSec := time.Since(start).Seconds()
	fmt.Fprintf(info, "k3: %s, %d layers, vocab %d; loaded in %.3f s; threads %d, %s\n",
		o.modelDir, cfg.NumLayers, cfg.Vocab, loadSec, o.threads, map[bool]string{true: "incremental", false: "full recompute"}[o.incremental])

	if o.tfCheck {
		return dump.finish(tfCheck(ctx, m, o, stdout, stderr), stderr)
	}
	if o.interactive {
		return converse(m, o, enc, stop, stdin, stdout, stderr, info)
	}
	printPlan(info, m, len(o.ids)+o.gen+1)
	rep := report{
		ModelDir: o.modelDir, PromptIDs: o.ids, GeneratedIDs: []int{}, Layers: cfg.NumLayers,
		LayersRequested: m.Layers(), Incremental: o.incremental, Threads: o.threads,
		StopIDs: append([]int{}, stop...), StopReason: "length", LoadSeconds: loadSec,
	}
	code := exitOK
	// runFailed reports a failure during or after generation; the first one's exit code and
	// message stand in the report, later ones are usually its consequences.
	runFailed := func(c int, err error) {
		fail(stderr, err)
		code = cmp.Or(code, c)
		rep.Error = cmp.Or(rep.Error, err.Error())
	}
	var dumpErr error
	gopts := k3.GenerateOptions{MaxTokens: o.gen, Stop: stop, FullRecompute: !o.incremental}
	if o.dumpLogits != "" {
		gopts.OnLogits = func(step int, logits []float32) {
			if step == 0 {
				dumpErr = writeLogits(o.dumpLogits, logits)
			}
		}
	}
	if o.gen == 0 && o.dumpLogits != "" {
		// Nothing is generated, so the prompt's logits are computed for the dump alone.
		s := m.NewSession()
		if err := s.Prefill(ctx, o.ids); err != nil {
			return failed(stderr, exitRuntime, err)
		}
		dumpErr = writeLogits(o.dumpLogits, s.Logits())
	}
	// The text goes to stdout as it becomes final, unless the report does (--out -).
	steps := o.verbose || !isTerminal(stderr)
	var out textOut
	if o.out != "-" {
		out.w = stdout
		if enc != nil {
			gopts.Tokens, gopts.OnText = enc, out.write
		}
	}
	var stream *tokenizer.StreamDecoder
	if enc != nil && steps {
		stream = enc.NewStreamDecoder()
	}
	var tok tokenCounters
	tok.step(m) // the prefill's reads are not the first token's
	genStart := time.Now()
	last := genStart
	gr, tokens, err := o.gf.start(ctx, m, o.ids, &gopts, enc)
	if _, ok := errors.AsType[*usageError](err); ok {
		return failed(stderr, exitUsage, err)
	} else if err != nil {
		return failed(stderr, exitRuntime, err)
	}
	rep.Generation = &gr.rep
	for id, err := range tokens {
		if err != nil {
			runFailed(exitRuntime, err)
			rep.StopReason = "error"
			if fe, ok := errors.AsType[*k3.ForwardError](err); ok && fe.Layer >= 0 {
				rep.LayersCompleted = fe.Layer // the failing step got through the layers before it
			}
			if _, ok := errors.AsType[*cache.ExpertLoadError](err); ok {
				fmt.Fprintln(stderr, "k3: RUN INVALID: a routed expert could not be loaded")
				rep.ExpertDrops++
				code = exitInvalid
			}
			break
		}
		now := time.Now()
		hit, read := tok.step(m)
		if steps {
			// One unit down the column, so that rows compare at a glance.
			fmt.Fprintf(info, "step %4d token %7d %8.3f s  hit %s  read %7.1f MB%s\n", len(rep.GeneratedIDs), id,
				now.Sub(last).Seconds(), hit, float64(read)/1e6, piece(stream, id))
		}
		last = now
		if enc == nil {
			out.id(id)
		}
		rep.GeneratedIDs = append(rep.GeneratedIDs, id)
		if slices.Contains(stop, id) {
			rep.StopReason = "stop_id"
		}
		if interrupted() != nil {
			break
		}
	}
	if reason, ok := gr.stopReason(); ok && rep.Error == "" {
		rep.StopReason = reason
	}
	if err := gr.finish(ctx, rep.GeneratedIDs); err != nil {
		runFailed(exitRuntime, err)
	}
	if s := interrupted(); s != nil {
		rep.StopReason = "signal"
		code = cmp.Or(code, signalExit(s))
	}
	code = dump.finish(code, stderr)
	if dumpErr != nil {
		fmt.Fprintf(stderr, "k3: --dump-logits: %v\n", dumpErr)
		code = cmp.Or(code, exitRuntime)
	}
	if code == exitOK || rep.StopReason == "signal" {
		rep.LayersCompleted = m.Layers()
	}
	if stream != nil && stream.Pending() > 0 {
		fmt.Fprintf(info, "     end of output  %q\n", stream.Flush())
	}
	out.end(enc == nil, stderr)
	if out.err != nil {
		runFailed(exitRuntime, fmt.Errorf("writing the output to stdout: %w", out.err))
	}
	if enc != nil {
		// Decoded in one piece from the ids, not from the stream pieces, so the text is complete
		// whatever the table showed; an id the tokenizer cannot decode is an error, not skipped.
		if text, err := enc.Decode(rep.GeneratedIDs); err != nil {
			runFailed(exitRuntime, fmt.Errorf("--tok: decoding the generated ids: %w", err))
		} else {
			if t, ok := gr.text(); ok {
				text = t // ends before the stop string
			}
			rep.GeneratedText = &text
		}
	}
	rep.FullIDs = append(append([]int{}, o.ids...), rep.GeneratedIDs...)
	if n := len(rep.GeneratedIDs); n > 0 {
		spt := time.Since(genStart).Seconds() / float64(n)
		rep.SecondsPerToken = &spt
	}
	rep.WallSeconds = time.Since(start).Seconds()
	rep.stats(m, info)
	if o.out != "" {
		if err := writeJSON(o.out, stdout, &rep); err != nil {
			fmt.Fprintf(stderr, "k3: --out: %v\n", err)
			code = cmp.Or(code, exitRuntime)
		}
	}
	printSummary(info, &rep, time.Since(genStart).Seconds())
	return code
}

// piece is the step table's text column: what the id adds to the decoded output, quoted; empty
// without a tokenizer. An undecodable id is shown, not fatal here (the final Decode reports it).
func piece(d *tokenizer.StreamDecoder, id int) string {
	if d == nil {
		return ""
	}
	s, err := d.Push(id)
	if err != nil {
		return "  (not decodable)"
	}
	return fmt.Sprintf("  %q", s)
}

// writeLogits writes --dump-logits: little-endian float32, one per vocabulary id.
func writeLogits(path string, logits []float32) error {
	b, err := binary.Append(nil, binary.LittleEndian, logits)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

// writeJSON writes v as indented JSON to path ("-": stdout).
func writeJSON(path string, stdout io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeOutput(path, stdout, append(b, '\n'))
}

// writeOutput writes b to path ("-": stdout) through a temporary file renamed into place, so a
// failed write leaves the previous file whole.
func writeOutput(path string, stdout io.Writer, b []byte) error {
	if path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

// tfCheck runs one teacher-forced forward over --ids and reports how many positions' greedy
// picks equal the next id (§11.1 --tf-check).
func tfCheck(ctx context.Context, m *k3.Model, o *runOptions, stdout, stderr io.Writer) int {
	rows, err := m.Forward(ctx, o.ids)
	if err != nil {
		return failed(stderr, exitRuntime, err)
	}
	matches := 0
	for i := 0; i+1 < len(o.ids); i++ {
		id, err := sample.Argmax(rows[i])
		if err != nil {
			fmt.Fprintf(stderr, "k3: position %d: %v\n", i, err)
			return exitRuntime
		}
		if id == o.ids[i+1] {
			matches++
		}
	}
	n := len(o.ids) - 1
	rep := struct {
		Positions int     `json:"tf_positions"`
		Matches   int     `json:"tf_matches"`
		Agreement float64 `json:"tf_agreement"`
	}{n, matches, float64(matches) / float64(n)}
	// The agreement is the command's output: on stdout unless --out names a file.
	if err := writeJSON(cmp.Or(o.out, "-"), stdout, rep); err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("--out: %w", err))
	}
	if !o.quiet {
		fmt.Fprintf(stderr, "k3: teacher forcing: %d of %d positions agree\n", matches, n)
	}
	return exitOK
}
