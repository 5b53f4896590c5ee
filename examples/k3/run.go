package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/tokenizer"
)

// Limits of SPEC §11.1.
const (
	maxPrompt = 32768
	maxGen    = 4096
	maxTotal  = 36864
)

var runFlags = flagSpec{
	"--ids": true, "--prompt": true, "--prompt-file": true, "--tok": true, "--gen": true, "--incremental": false, "--threads": true, "--stop-ids": true,
	"--no-stop": false, "--out": true, "--dump-logits": true, "--tf-check": false,
}

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

	gf genOptions // genflags.go
}

func parseRun(args []string) (*runOptions, error) {
	pos, vals, err := parseArgs(args, withGenFlags(runFlags))
	if err != nil {
		return nil, err
	}
	if len(pos) != 1 {
		return nil, usagef("", "expected exactly one model directory, got %d positional arguments", len(pos))
	}
	o := &runOptions{modelDir: pos[0], gen: 8, threads: runtime.GOMAXPROCS(0), out: "k3_run.json"}
	if err := o.parsePrompt(vals); err != nil {
		return nil, err
	}
	if s, ok := vals["--gen"]; ok {
		if o.gen, err = parseInt("--gen", s, 0, maxGen); err != nil {
			return nil, err
		}
	}
	if s, ok := vals["--threads"]; ok {
		if o.threads, err = parseInt("--threads", s, 1, 4096); err != nil {
			return nil, err
		}
	}
	_, o.incremental = vals["--incremental"]
	_, o.noStop = vals["--no-stop"]
	_, o.tfCheck = vals["--tf-check"]
	if o.ids != nil {
		if err := o.checkLengths(); err != nil {
			return nil, err
		}
	}
	if s, ok := vals["--stop-ids"]; ok {
		if o.noStop {
			return nil, usagef("--stop-ids", "conflicts with --no-stop")
		}
		if o.stop, err = parseIDList("--stop-ids", s, 1024); err != nil {
			return nil, err
		}
		o.stopGiven = true
	}
	if o.gf, err = parseGenFlags(args, vals, o.incremental, o.tokDir); err != nil {
		return nil, err
	}
	if s, ok := vals["--out"]; ok {
		if s == "" {
			return nil, usagef("--out", "empty path")
		}
		o.out = s
	}
	if s, ok := vals["--dump-logits"]; ok {
		if s == "" {
			return nil, usagef("--dump-logits", "empty path")
		}
		o.dumpLogits = s
	}
	return o, nil
}

// parsePrompt takes exactly one prompt source. Text sources need --tok; --ids may come with it
// (then the output is decoded and the tokenizer's stop ids apply).
func (o *runOptions) parsePrompt(vals map[string]string) error {
	var given []string
	for _, f := range []string{"--ids", "--prompt", "--prompt-file"} {
		if _, ok := vals[f]; ok {
			given = append(given, f)
		}
	}
	switch len(given) {
	case 0:
		return usagef("--ids", "a prompt is required (one of --ids, --prompt, --prompt-file)")
	case 1:
	default:
		return usagef(given[1], "conflicts with %s: give exactly one of --ids, --prompt, --prompt-file", given[0])
	}
	o.promptFlag = given[0]
	if s, ok := vals["--tok"]; ok {
		if s == "" {
			return usagef("--tok", "empty path")
		}
		o.tokDir = s
	}
	var err error
	switch o.promptFlag {
	case "--ids":
		o.ids, err = parseIDList("--ids", vals["--ids"], maxPrompt)
		return err
	case "--prompt":
		o.promptText = vals["--prompt"]
	case "--prompt-file":
		if o.promptText, err = readPromptFile(vals["--prompt-file"]); err != nil {
			return err
		}
	}
	if o.tokDir == "" {
		return usagef(o.promptFlag, "a text prompt needs --tok DIR (the directory of %s and %s)", tokRanksFile, tokConfigFile)
	}
	return nil
}

// checkLengths applies the limits of SPEC §11.1 once the prompt ids are known.
func (o *runOptions) checkLengths() error {
	if len(o.ids)+o.gen+1 > maxTotal {
		return usagef("--gen", "prompt (%d) + gen (%d) + 1 exceeds %d", len(o.ids), o.gen, maxTotal)
	}
	if o.tfCheck && len(o.ids) < 2 {
		return usagef("--tf-check", "needs at least 2 ids")
	}
	return nil
}

// report is the JSON object of SPEC §11.1, limited to the keys this engine can fill today.
type report struct {
	ModelDir        string   `json:"model_dir"`
	PromptIDs       []int    `json:"prompt_ids"`
	GeneratedIDs    []int    `json:"generated_ids"`
	FullIDs         []int    `json:"full_ids"`
	Layers          int      `json:"layers"`
	LayersRequested int      `json:"layers_requested"`
	LayersCompleted int      `json:"layers_completed"`
	Incremental     bool     `json:"incremental"`
	Threads         int      `json:"threads"`
	StopIDs         []int    `json:"stop_ids"`
	StopReason      string   `json:"stop_reason"`
	ExpertDrops     int      `json:"expert_drops"`
	PeakRSSBytes    int64    `json:"peak_rss_bytes"`
	WallSeconds     float64  `json:"wall_seconds"`
	LoadSeconds     float64  `json:"load_seconds"`
	SecondsPerToken *float64 `json:"seconds_per_token"` // null when nothing was generated
	GeneratedText   *string  `json:"generated_text"`    // the complete decoded text; null without --tok
	Error           string   `json:"error,omitempty"`

	Generation *genReport `json:"generation"` // genflags.go
}

// cmdRun decodes greedily. sigs, when non-nil, replaces the process signal channel (tests).
func cmdRun(args []string, stdout, stderr io.Writer, sigs chan os.Signal) int {
	o, err := parseRun(args)
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitUsage
	}
	return decode(o, stdout, stderr, sigs)
}

func decode(o *runOptions, stdout, stderr io.Writer, sigs chan os.Signal) int {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first SIGINT/SIGTERM lets the token in flight finish, stops generation and still writes
	// the report; a second one kills the process (signal.Reset restores the default action). The
	// forward pass itself is not cancelled, so no computed work is thrown away.
	if sigs == nil {
		sigs = make(chan os.Signal, 2)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigs)
	}
	var gotSig atomicSignal
	go func() {
		select {
		case s := <-sigs:
			gotSig.set(s)
			signal.Reset(os.Interrupt, syscall.SIGTERM)
		case <-ctx.Done():
		}
	}()

	var enc *tokenizer.Encoding
	if o.tokDir != "" {
		var warnings []string
		var err error
		if enc, warnings, err = loadTokenizer(o.tokDir); err != nil {
			fmt.Fprintf(stderr, "k3: %v\n", err)
			return exitRuntime
		}
		for _, w := range warnings {
			fmt.Fprintf(stderr, "k3: warning: %s\n", w)
		}
		if o.ids == nil {
			if o.ids, err = encodePrompt(enc, o.promptFlag, o.promptText); err == nil {
				err = o.checkLengths()
			}
			if err != nil {
				fmt.Fprintf(stderr, "k3: %v\n", err)
				return exitUsage
			}
			fmt.Fprintf(stderr, "k3: %s: %d prompt ids\n", o.promptFlag, len(o.ids))
		}
	}

	m, err := k3.Open(o.modelDir, k3.WithThreads(o.threads))
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitRuntime
	}
	defer m.Close()
	for _, w := range m.Warnings() {
		fmt.Fprintf(stderr, "k3: warning: %s\n", w)
	}
	cfg := m.Config()
	for i, id := range o.ids {
		if id >= cfg.Vocab {
			fmt.Fprintf(stderr, "k3: %s: element %d: id %d is outside [0, %d)\n", o.promptFlag, i, id, cfg.Vocab)
			return exitUsage
		}
	}
	stop := o.stop
	if !o.stopGiven && !o.noStop {
		stop = defaultStop(enc, cfg.EOSTokenIDs)
	}
	if o.noStop {
		stop = nil
	}
	loadSec := time.Since(start).Seconds()
	fmt.Fprintf(stderr, "k3: %s, %d layers, vocab %d; loaded in %.3f s; threads %d, %s\n",
		o.modelDir, cfg.NumLayers, cfg.Vocab, loadSec, o.threads, mode(o.incremental))

	if o.tfCheck {
		return tfCheck(ctx, m, o, stdout, stderr)
	}
	printPlan(stderr, m, len(o.ids)+o.gen+1)
	rep := report{
		ModelDir: o.modelDir, PromptIDs: o.ids, GeneratedIDs: []int{}, Layers: cfg.NumLayers,
		LayersRequested: cfg.NumLayers, Incremental: o.incremental, Threads: o.threads,
		StopIDs: nonNil(stop), StopReason: "length", LoadSeconds: loadSec,
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
			fmt.Fprintf(stderr, "k3: %v\n", err)
			return exitRuntime
		}
		dumpErr = writeLogits(o.dumpLogits, s.Logits())
	}
	var stream *tokenizer.StreamDecoder
	if enc != nil {
		stream = enc.NewStreamDecoder()
	}
	genStart := time.Now()
	last := genStart
	code := exitOK
	gr, tokens, err := o.gf.start(ctx, m, o.ids, &gopts, enc)
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		if _, ok := errors.AsType[*usageError](err); ok {
			return exitUsage
		}
		return exitRuntime
	}
	rep.Generation = &gr.rep
	for id, err := range tokens {
		if err != nil {
			fmt.Fprintf(stderr, "k3: %v\n", err)
			rep.Error = err.Error()
			rep.StopReason = "error"
			code = exitRuntime
			if _, ok := errors.AsType[*k3.ExpertLoadError](err); ok {
				fmt.Fprintln(stderr, "k3: RUN INVALID: a routed expert could not be loaded")
				rep.ExpertDrops++
				code = exitInvalid
			}
			break
		}
		now := time.Now()
		fmt.Fprintf(stderr, "step %4d token %7d %8.3f s%s\n", len(rep.GeneratedIDs), id, now.Sub(last).Seconds(), piece(stream, id))
		last = now
		rep.GeneratedIDs = append(rep.GeneratedIDs, id)
		if contains(stop, id) {
			rep.StopReason = "stop_id"
		}
		if gotSig.get() != nil {
			break
		}
	}
	if reason, ok := gr.stopReason(); ok && rep.Error == "" {
		rep.StopReason = reason
	}
	if err := gr.finish(ctx, rep.GeneratedIDs); err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		if rep.Error == "" {
			rep.Error = err.Error()
		}
		if code == exitOK {
			code = exitRuntime
		}
	}
	if s := gotSig.get(); s != nil {
		rep.StopReason = "signal"
		if code == exitOK {
			code = signalExit(s)
		}
	}
	if dumpErr != nil {
		fmt.Fprintf(stderr, "k3: --dump-logits: %v\n", dumpErr)
		if code == exitOK {
			code = exitRuntime
		}
	}
	if code == exitOK || rep.StopReason == "signal" {
		rep.LayersCompleted = cfg.NumLayers
	}
	if stream != nil && stream.Pending() > 0 {
		fmt.Fprintf(stderr, "     end of output  %q\n", stream.Flush())
	}
	if enc != nil {
		// Decoded in one piece from the ids, not from the stream pieces, so the text is complete
		// whatever the table showed; an id the tokenizer cannot decode is an error, not skipped.
		text, err := enc.Decode(rep.GeneratedIDs)
		if err != nil {
			fmt.Fprintf(stderr, "k3: --tok: decoding the generated ids: %v\n", err)
			if rep.Error == "" {
				rep.Error = err.Error()
			}
			if code == exitOK {
				code = exitRuntime
			}
		} else {
			if t, ok := gr.text(); ok {
				text = t // ends before the stop string
			}
			rep.GeneratedText = &text
			fmt.Fprintf(stderr, "k3: generated text: %q\n", text)
		}
	}
	rep.FullIDs = append(append([]int{}, o.ids...), rep.GeneratedIDs...)
	if n := len(rep.GeneratedIDs); n > 0 {
		spt := time.Since(genStart).Seconds() / float64(n)
		rep.SecondsPerToken = &spt
	}
	rep.WallSeconds = time.Since(start).Seconds()
	rep.PeakRSSBytes = peakRSS()
	if err := writeReport(o.out, stdout, &rep); err != nil {
		fmt.Fprintf(stderr, "k3: --out: %v\n", err)
		if code == exitOK {
			code = exitRuntime
		}
	}
	if rep.SecondsPerToken != nil {
		fmt.Fprintf(stderr, "k3: %d tokens, %.4f s/token, peak RSS %d bytes\n", len(rep.GeneratedIDs), *rep.SecondsPerToken, rep.PeakRSSBytes)
	}
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

func mode(incremental bool) string {
	if incremental {
		return "incremental"
	}
	return "full recompute"
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func signalExit(s os.Signal) int {
	if s == syscall.SIGTERM {
		return 143
	}
	return 130
}

func writeLogits(path string, logits []float32) error {
	buf := make([]byte, 4*len(logits))
	for i, v := range logits {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
	}
	return os.WriteFile(path, buf, 0o644)
}

func writeReport(path string, stdout io.Writer, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func defaultThreads() int { return runtime.GOMAXPROCS(0) }

// tfCheck runs one teacher-forced forward over --ids and reports how many positions' greedy
// picks equal the next id (SPEC §11.1 --tf-check).
func tfCheck(ctx context.Context, m *k3.Model, o *runOptions, stdout, stderr io.Writer) int {
	rows, err := m.Forward(ctx, o.ids)
	if err != nil {
		fmt.Fprintf(stderr, "k3: %v\n", err)
		return exitRuntime
	}
	matches := 0
	for i := 0; i+1 < len(o.ids); i++ {
		id, err := k3.Argmax(rows[i])
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
	b, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		b = append(b, '\n')
		if o.out == "-" {
			_, err = stdout.Write(b)
		} else {
			err = os.WriteFile(o.out, b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "k3: --out: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintf(stderr, "k3: teacher forcing: %d of %d positions agree\n", matches, n)
	return exitOK
}
