package main

// Sampling, stop strings, conversation state files and speculative decoding (the --temperature
// ... --spec flags). run.go calls in at three points: genFlags (the flag table),
// parseGenFlags (validation) and genOptions.start (the token stream and the state file).

import (
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/atomicfile"
	"github.com/k3-project/k3/sample"
	"github.com/k3-project/k3/tokenizer"
)

// genFlags are the flags of this file; all take a value.
var genFlags = flagSpec{"--temperature": true, "--top-k": true, "--top-p": true, "--min-p": true, "--repeat-penalty": true,
	"--repeat-last-n": true, "--seed": true, "--stop": true, "--save-state": true, "--load-state": true, "--spec": true,
	"--ctx-size": true}

const genUsage = `sampling, stopping, context, state and speculation:
  --temp X, --temperature X
                     sample at temperature X >= 0 (default 0: greedy)
  --top-k N          keep the N most likely tokens (0 = all)
  --top-p X          keep the most likely tokens up to probability X in [0, 1] (0 or 1 = all)
  --min-p X          drop tokens below X times the top probability, X in [0, 1) (0 = off)
  --repeat-penalty X penalise the last --repeat-last-n ids, X >= 1 (1 = off)
  --repeat-last-n N  ids the penalty looks at (default 64; 0 = the whole history)
  -s, --seed N       random stream, 0..2^64-1 (default 0); same seed, same tokens everywhere
  -r, --reverse-prompt TEXT, --stop TEXT
                     stop when the decoded text contains TEXT (repeatable; needs a tokenizer);
                     the generated text ends before it
  -c, --ctx-size N   the most positions the conversation may hold, 1..36864 (default 36864);
                     generation stops when it is full
  --save-state PATH  write the conversation state (K3ST v2) after the run, every emitted token
                     processed, so the next turn continues exactly
  --load-state PATH  continue a saved conversation: the prompt is the next turn's ids (needs
                     --incremental); the saved sampler is resumed unless sampling flags are given
  --spec N           exact prompt-lookup speculative decoding with drafts of up to N ids
                     (0 = off, the default; at most 32; not with --full-recompute)
`

// genOptions are the validated flags of this file.
type genOptions struct {
	sampler   sample.Options
	sampling  bool // any sampling flag given
	stops     []string
	saveState string
	loadState string
	spec      int
	ctx       int // --ctx-size
}

// parseFloat parses a finite decimal number in [lo, hi] (hiOpen: hi excluded).
func parseFloat(flag, s string, lo, hi float64, hiOpen bool) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || strings.ContainsAny(s, "xXpP_") {
		return 0, usagef(flag, "%q is not a finite decimal number", s)
	}
	if v < lo || v > hi || (hiOpen && v == hi) {
		return 0, usagef(flag, "%v is outside [%v, %v%s", v, lo, hi, map[bool]string{false: "]", true: ")"}[hiOpen])
	}
	return v, nil
}

// samplingFlags choose a sampler; without any of them decoding is greedy (or resumes a loaded
// state's sampler).
var samplingFlags = []string{"--temperature", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--seed"}

// parseGenFlags validates this file's flags; mistakes are recorded in a.err.
func parseGenFlags(a *args, incremental bool, tokDir string) genOptions {
	g := genOptions{sampling: slices.ContainsFunc(samplingFlags, a.has)}
	for _, f := range []struct {
		flag   string
		dst    *float64
		lo, hi float64
		hiOpen bool
	}{
		{"--temperature", &g.sampler.Temperature, 0, 1e6, false},
		{"--top-p", &g.sampler.TopP, 0, 1, false},
		{"--min-p", &g.sampler.MinP, 0, 1, true},
		{"--repeat-penalty", &g.sampler.RepeatPenalty, 1, 1e6, false},
	} {
		*f.dst = get(a, f.flag, 0, func(flag, s string) (float64, error) { return parseFloat(flag, s, f.lo, f.hi, f.hiOpen) })
	}
	g.sampler.TopK = a.int("--top-k", 0, 0, math.MaxInt32)
	g.ctx = a.int("--ctx-size", maxTotal, 1, maxTotal)
	g.sampler.PenaltyWindow = a.int("--repeat-last-n", 64, 0, math.MaxInt32)
	if s, ok := a.vals["--seed"]; ok && a.err == nil {
		var err error
		if s == "" || strings.TrimLeft(s, "0123456789") != "" {
			a.check(usagef("--seed", "%q is not a decimal integer in [0, 2^64)", s))
		} else if g.sampler.Seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			a.check(usagef("--seed", "%q is out of range [0, 2^64)", s))
		}
	}
	if g.spec = a.int("--spec", 0, 0, k3.MaxSpeculative); g.spec > 0 && !incremental {
		a.check(usagef("--spec", "conflicts with --full-recompute (speculation needs incremental decoding)"))
	}
	if g.stops = a.all["--stop"]; len(g.stops) > 0 && tokDir == "" {
		a.check(usagef("--stop", "stop strings are matched on decoded text and need a tokenizer (--tok DIR)"))
	}
	g.saveState, g.loadState = a.vals["--save-state"], a.vals["--load-state"]
	if g.loadState != "" && !incremental {
		a.check(usagef("--load-state", "conflicts with --full-recompute (a saved state continues incrementally)"))
	}
	if _, err := sample.New(g.sampler); err != nil && a.err == nil {
		a.check(usagef("", "%v", err))
	}
	return g
}

// genReport is the "generation" object of the JSON report.
type genReport struct {
	Sampler     *sample.Options `json:"sampler"` // null: greedy
	StopString  *string         `json:"stop_string"`
	LoadedState *string         `json:"loaded_state"`
	LoadedLen   int             `json:"loaded_positions"`
	SavedState  *string         `json:"saved_state"`
	Spec        int             `json:"spec"`
	Verifies    int             `json:"spec_passes"`
	Drafted     int             `json:"spec_drafted"`
	Accepted    int             `json:"spec_accepted"`
}

// genRun is one run's generation: the session when there is one, and the result.
type genRun struct {
	g       *genOptions
	m       *k3.Model
	s       *k3.Session
	sampler *sample.Sampler
	prompt  []int
	res     k3.GenerateResult
	rep     genReport
}

// start sets up gopts (sampler, stop strings, speculation) and returns the token stream: from
// a loaded state continued by prompt when --load-state is given, from prompt otherwise.
func (g *genOptions) start(ctx context.Context, m *k3.Model, prompt []int, gopts *k3.GenerateOptions,
	enc *tokenizer.Encoding) (*genRun, iter.Seq2[int, error], error) {
	r := &genRun{g: g, m: m, prompt: prompt, rep: genReport{Spec: g.spec}}
	var err error
	if g.sampling {
		if r.sampler, err = sample.New(g.sampler); err != nil {
			return nil, nil, err
		}
	}
	if len(g.stops) > 0 {
		gopts.StopStrings, gopts.Tokens = g.stops, enc
	}
	gopts.Speculative = g.spec
	gopts.MaxContext = g.ctx
	if g.loadState != "" {
		s, saved, err := loadSession(m, g.loadState)
		if err != nil {
			return nil, nil, fmt.Errorf("--load-state %s: %w", g.loadState, err)
		}
		if s.Len()+len(prompt)+gopts.MaxTokens+1 > maxTotal {
			return nil, nil, usagef("--load-state", "%d saved positions + prompt %d + gen %d + 1 exceed %d",
				s.Len(), len(prompt), gopts.MaxTokens, maxTotal)
		}
		if r.sampler == nil {
			r.sampler = saved
		}
		r.s, r.rep.LoadedState, r.rep.LoadedLen = s, &g.loadState, s.Len()
	}
	if r.sampler != nil {
		o := r.sampler.Options()
		r.rep.Sampler = &o
	}
	gopts.Sampler = r.sampler
	gopts.OnDone = func(res k3.GenerateResult) { r.res = res }
	if r.s == nil && !gopts.FullRecompute && g.saveState != "" {
		r.s = m.NewSession() // kept, so the state can be saved without recomputing
	}
	if r.s == nil {
		return r, m.Generate(ctx, prompt, *gopts), nil
	}
	if err := r.s.Prefill(ctx, prompt); err != nil {
		return nil, nil, err
	}
	return r, r.s.Generate(ctx, *gopts), nil
}

// stopReason maps the library's reason onto the report's names.
func (r *genRun) stopReason() (string, bool) {
	switch r.res.Reason {
	case k3.StopString:
		s := r.res.StopText
		r.rep.StopString = &s
		return "stop_string", true
	case k3.StopContext:
		return "context", true
	}
	return "", false
}

// text returns the generated text ending before a matched stop string.
func (r *genRun) text() (string, bool) {
	if r.res.Reason != k3.StopString {
		return "", false
	}
	return tokenizer.ReplaceInvalidUTF8(r.res.Text), true
}

// finish records the speculation counts and writes --save-state: the session then holds every
// emitted token (the last one is processed here), so the next turn's ids continue it exactly.
func (r *genRun) finish(ctx context.Context, generated []int) error {
	r.rep.Verifies, r.rep.Drafted, r.rep.Accepted = r.res.Verifies, r.res.Drafted, r.res.Accepted
	if r.g.saveState == "" {
		return nil
	}
	s := r.s
	if s == nil {
		s = r.m.NewSession()
		if err := s.Prefill(ctx, append(append([]int(nil), r.prompt...), generated...)); err != nil {
			return fmt.Errorf("--save-state: %w", err)
		}
	} else if n := len(generated); n > 0 {
		if err := s.Step(ctx, generated[n-1]); err != nil {
			return fmt.Errorf("--save-state: %w", err)
		}
	}
	if err := saveSession(r.g.saveState, s, r.sampler); err != nil {
		return fmt.Errorf("--save-state: %w", err)
	}
	r.rep.SavedState = &r.g.saveState
	return nil
}

// saveSession writes s and its sampler to path as a K3ST file, through a temporary file renamed
// into place (a unique name beside it), so an interrupted or failed write never leaves a
// truncated state under the name.
func saveSession(path string, s *k3.Session, sm *sample.Sampler) error {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := s.Save(f, sm); err != nil {
		return err
	}
	return f.Commit()
}

// loadSession reads a K3ST file written by saveSession (or --save-state) for m.
func loadSession(m *k3.Model, path string) (*k3.Session, *sample.Sampler, error) {
	r, closer, err := openRegular(path)
	if err != nil {
		return nil, nil, err
	}
	defer closer.Close()
	return k3.LoadSession(m, r)
}
