package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/peterh/liner"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/sample"
	"github.com/k3-project/k3/sysmem"
	"github.com/k3-project/k3/tokenizer"
)

var chatCmd = command{name: "chat", npos: -1, flags: runCmd.flags, main: func(a *args, stdout, stderr io.Writer) int {
	a.vals["--interactive"] = ""
	return runMain(a, stdout, stderr)
}, help: chatUsage}

const chatUsage = `usage: k3 chat <model_dir> [flags]   (the same as k3 run <model_dir> -i [flags])

A conversation with the model on one session. Each line read continues the text: only the new
line is computed, never the history again. K3 is a base model: the line is appended as typed
(no chat template, no newline added) and the model continues it for up to -n tokens, written to
stdout as it is produced and ended with a newline. An empty line continues the text further.
Without a tokenizer each line is a list of ids ("1,2,3") and the output is ids. A prompt given
with -p, -f or --ids is the first turn. On a terminal the line is edited in place (history with
the arrow keys); otherwise lines are read from standard input, at most 1 MiB each.

  /save FILE   write the conversation (K3ST: state, ids and the sampler) to FILE
  /load FILE   continue a saved conversation instead of this one
  /reset       start again from nothing (the sampler restarts from its seed)
  /stats       positions, tokens generated, s/token, bytes read, peak RSS
  /quit        end (also Ctrl-D or the end of the input)
  //text       send text that begins with "/"

Ctrl-C while the model writes stops the turn after the token in flight and keeps the session;
at the prompt it discards the line. Run's flags apply (k3 run --help); --out, --dump-logits,
--save-state, --load-state, --tf-check and --full-recompute do not.
`

// errLineTooLong is a line of standard input longer than maxPromptBytes.
var errLineTooLong = fmt.Errorf("a line of standard input is longer than %d bytes", maxPromptBytes)

// lineSource is where the conversation's lines come from: a line editor on a terminal, plain
// lines otherwise. next returns io.EOF at the end and liner.ErrPromptAborted for a Ctrl-C at
// the prompt.
type lineSource interface {
	next() (string, error)
	close()
}

type editor struct{ st *liner.State }

func (e editor) next() (string, error) {
	line, err := e.st.Prompt("> ")
	if err == nil && line != "" {
		e.st.AppendHistory(line)
	}
	return line, err
}

func (e editor) close() { e.st.Close() }

type plainLines struct{ sc *bufio.Scanner }

func (p plainLines) next() (string, error) {
	if p.sc.Scan() {
		return strings.TrimSuffix(p.sc.Text(), "\r"), nil
	}
	switch err := p.sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return "", errLineTooLong
	case err != nil:
		return "", err
	}
	return "", io.EOF
}

func (plainLines) close() {}

// newLineSource edits lines in place when both standard input and stdout are terminals.
func newLineSource(in io.Reader, stdout io.Writer) lineSource {
	if f, ok := in.(*os.File); ok && f == os.Stdin && isTerminal(f) && isTerminal(stdout) {
		st := liner.NewLiner()
		st.SetCtrlCAborts(true)
		return editor{st}
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxPromptBytes)
	return plainLines{sc}
}

// conversation is the state of k3 chat: one session, and the id it generated last, which the
// session has not processed yet (it is fed with the next turn, so a turn that ends never costs
// a forward pass that nobody may need).
type conversation struct {
	m       *k3.Model
	o       *runOptions
	enc     *tokenizer.Encoding
	stop    []int
	s       *k3.Session
	sampler *sample.Sampler
	pending []int
	// generated and genSeconds are the /stats figures since the start (or /reset, /load).
	generated  int
	genSeconds float64
	// generating is set while a turn runs; stopTurn asks it to end after the token in flight.
	generating, stopTurn atomic.Bool
}

// converse runs the interactive mode on m. Commands' answers and errors go to stderr; the
// generated output alone goes to stdout.
func converse(m *k3.Model, o *runOptions, enc *tokenizer.Encoding, stop []int, in io.Reader, stdout, stderr, info io.Writer) int {
	c := &conversation{m: m, o: o, enc: enc, stop: stop, s: m.NewSession()}
	c.restartSampler()
	src := newLineSource(in, stdout)
	defer src.close()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer func() {
		signal.Stop(sigs)
		close(sigs) // ends the goroutine below
	}()
	go func() {
		for s := range sigs {
			if s == os.Interrupt && c.generating.Load() && !c.stopTurn.Swap(true) {
				fmt.Fprintln(stderr, "\nk3: stopping after the token in flight (Ctrl-C again to quit)")
				continue
			}
			src.close()
			fmt.Fprintln(stderr, "\nk3: interrupted")
			os.Exit(signalExit(s))
		}
	}()

	what := "text"
	if enc == nil {
		what = "ids, comma separated"
	}
	fmt.Fprintf(info, "k3: chat: each line (%s) continues the conversation; /save FILE, /load FILE, /reset, /stats, /quit\n", what)
	if o.ids != nil {
		if err := c.turn(o.ids, stdout); err != nil {
			fail(stderr, err)
		}
	}
	for {
		line, err := src.next()
		switch {
		case errors.Is(err, io.EOF):
			return exitOK
		case errors.Is(err, liner.ErrPromptAborted):
			continue
		case errors.Is(err, errLineTooLong):
			return failed(stderr, exitUsage, err)
		case err != nil:
			return failed(stderr, exitRuntime, fmt.Errorf("reading the conversation: %w", err))
		}
		if strings.HasPrefix(line, "/") && !strings.HasPrefix(line, "//") {
			if quit := c.command(line, stderr); quit {
				return exitOK
			}
			continue
		}
		ids, err := c.encode(strings.TrimPrefix(line, "/"))
		if err == nil {
			err = c.turn(ids, stdout)
		}
		if err != nil {
			fail(stderr, err)
		}
	}
}

// encode turns a line into ids: the tokenizer's, as run encodes --prompt, or an id list.
func (c *conversation) encode(line string) ([]int, error) {
	if line == "" {
		return nil, nil
	}
	if c.enc == nil {
		ids, err := parseIDList("input", line, maxPrompt)
		if err != nil {
			return nil, err
		}
		for i, id := range ids {
			if v := c.m.Config().Vocab; id >= v {
				return nil, usagef("input", "element %d: id %d is outside the vocabulary [0, %d)", i, id, v)
			}
		}
		return ids, nil
	}
	if len(line) > maxPromptBytes {
		return nil, errLineTooLong
	}
	ids, err := c.enc.Encode(line, tokenizer.AllowSpecial)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	return ids, nil
}

// turn feeds the pending id and ids to the session and generates the reply onto stdout,
// followed by a newline.
func (c *conversation) turn(ids []int, stdout io.Writer) error {
	ctx := context.Background()
	feed := append(append([]int(nil), c.pending...), ids...)
	if n := c.s.Len() + len(feed); n >= c.o.gf.ctx {
		return fmt.Errorf("the context is full (%d of %d positions with this line): /reset, or /load a shorter conversation", n, c.o.gf.ctx)
	}
	if len(feed) == 0 && c.s.Logits() == nil {
		return errors.New("nothing to continue yet: type some text")
	}
	// A Ctrl-C from here on ends the turn at the next token boundary; one during the prefill
	// lets it finish (the session stays whole) and skips the generation.
	c.stopTurn.Store(false)
	c.generating.Store(true)
	defer c.generating.Store(false)
	if len(feed) > 0 {
		// Ids outside the vocabulary are refused before anything is computed: the session is
		// unchanged and the pending id stays pending.
		if err := c.s.Prefill(ctx, feed); err != nil {
			return c.broken(err)
		}
		c.pending = nil
	}
	out := &textOut{w: stdout}
	gopts := k3.GenerateOptions{MaxTokens: c.o.gen, Stop: c.stop, Sampler: c.sampler, MaxContext: c.o.gf.ctx, Speculative: c.o.gf.spec}
	if c.enc != nil {
		gopts.Tokens, gopts.OnText, gopts.StopStrings = c.enc, out.write, c.o.gf.stops
	}
	start, last, n := time.Now(), -1, 0
	var err error
	if c.stopTurn.Load() {
		gopts.MaxTokens = 0
	}
	for id, gerr := range c.s.Generate(ctx, gopts) {
		if gerr != nil {
			err = gerr
			break
		}
		last, n = id, n+1
		if c.enc == nil {
			out.id(id)
		}
		if c.stopTurn.Load() {
			break
		}
	}
	c.generated += n
	c.genSeconds += time.Since(start).Seconds()
	if last >= 0 {
		c.pending = []int{last}
	}
	out.write([]byte{'\n'})
	if err == nil {
		err = out.err
	}
	return c.broken(err)
}

// broken adds what to do to an error that left the session unusable.
func (c *conversation) broken(err error) error {
	if errors.Is(err, k3.ErrBroken) || errors.As(err, new(*k3.ForwardError)) {
		return fmt.Errorf("%w (the conversation cannot go on: /reset or /load FILE)", err)
	}
	return err
}

// restartSampler gives the conversation a sampler in the state the flags describe (nil: greedy).
func (c *conversation) restartSampler() {
	c.sampler = nil
	if c.o.gf.sampling {
		c.sampler, _ = sample.New(c.o.gf.sampler) // validated with the flags
	}
}

// chatCommands are the slash commands, for suggestions.
var chatCommands = []string{"/save", "/load", "/reset", "/stats", "/quit", "/exit", "/help"}

// command runs a slash command; it returns true for /quit.
func (c *conversation) command(line string, w io.Writer) (quit bool) {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	needs := func() bool {
		if arg == "" {
			fmt.Fprintf(w, "k3: %s needs a file name\n", name)
		}
		return arg != ""
	}
	switch name {
	case "/quit", "/exit":
		return true
	case "/help":
		fmt.Fprint(w, chatUsage)
	case "/reset":
		c.s.Reset()
		c.pending, c.generated, c.genSeconds = nil, 0, 0
		c.restartSampler()
		fmt.Fprintln(w, "k3: the conversation starts again")
	case "/save":
		if !needs() {
			break
		}
		// The file holds every id so far: the pending one is processed first.
		if len(c.pending) > 0 {
			if err := c.s.Step(context.Background(), c.pending[0]); err != nil {
				fail(w, c.broken(fmt.Errorf("/save: %w", err)))
				break
			}
			c.pending = nil
		}
		if err := saveSession(arg, c.s, c.sampler); err != nil {
			fail(w, fmt.Errorf("/save: %w", err))
			break
		}
		fmt.Fprintf(w, "k3: saved %d positions to %s\n", c.s.Len(), arg)
	case "/load":
		if !needs() {
			break
		}
		s, saved, err := loadSession(c.m, arg)
		if err != nil {
			fail(w, fmt.Errorf("/load %s: %w (the conversation is unchanged)", arg, err))
			break
		}
		c.s, c.pending, c.generated, c.genSeconds = s, nil, 0, 0
		// As --load-state: the saved sampler goes on unless sampling flags chose one.
		if !c.o.gf.sampling {
			c.sampler = saved
		}
		fmt.Fprintf(w, "k3: loaded %d positions from %s\n", s.Len(), arg)
	case "/stats":
		spt := "-"
		if c.generated > 0 {
			spt = fmt.Sprintf("%.4f", c.genSeconds/float64(c.generated))
		}
		fmt.Fprintf(w, "k3: %d positions (+%d pending) of %d; %d tokens generated, %s s/token; read %s; peak RSS %s\n",
			c.s.Len(), len(c.pending), c.o.gf.ctx, c.generated, spt, size(bytesRead(c.m.Stats())), size(sysmem.PeakRSS()))
	default:
		if near := nearest(name, chatCommands); near != "" {
			fmt.Fprintf(w, "k3: unknown command %s (did you mean %s?)\n", name, near)
		} else {
			fmt.Fprintf(w, "k3: unknown command %s (/help lists them; //text sends text beginning with /)\n", name)
		}
	}
	return false
}
