package main

// `k3 serve`: the model behind an OpenAI-compatible HTTP endpoint. The HTTP layer is package
// internal/serve; this file parses the command line (run's memory, thread and tokenizer flags,
// llama-server's --host, --port and --api-key), opens the model, listens, and drains on SIGTERM.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/examples/k3/internal/serve"
	"github.com/k3-project/k3/tokenizer"
)

var serveCmd = command{name: "serve", npos: 1, what: "exactly one model directory", main: serveMain,
	flags: merge(budgetFlags, flagSpec{
		"--host": true, "--port": true, "--api-key": true, "--api-key-file": true, "--tok": true, "--threads": true,
		"--parallel": true, "--max-tokens": true, "--max-prompt": true, "--max-body": true, "--alias": true,
	}), help: `usage: k3 serve <model_dir> [--host H] [--port P] [--api-key KEY] [flags]

Serves the model over HTTP with OpenAI's text-completion API (K3 is a base model: it continues
text, there is no chat template):

  POST /v1/completions  prompt (a string or token ids), max_tokens (default 16), temperature,
                        top_p, top_k, min_p, repeat_penalty, repeat_last_n, frequency_penalty,
                        presence_penalty, seed, stop, stream (server-sent events ending with
                        data: [DONE]), stream_options.include_usage, return_tokens
  GET  /v1/models       GET /health (no key needed)
  POST /tokenize        {"content": TEXT} -> {"tokens": [...]}   POST /detokenize: the reverse

Sampling fields map onto the sampler exactly as k3 run's flags do (no sampling field: greedy),
so one seed and one set of settings give the same text from both.

  --host H           address to listen on (default 127.0.0.1); anything but a loopback address
                     needs an API key
  --port P           TCP port, 0..65535 (default 8080; 0 picks a free one, printed at start)
  --api-key KEY      require "Authorization: Bearer KEY" on every endpoint but /health
  --api-key-file F   the key from the first line of file F (keeps it out of the process list)
  --alias NAME       the model's name in /v1/models and requests (default: the directory's name)
  --tok DIR          tokenizer directory (default: the model directory when it holds one)
  --threads N        worker goroutines, >= 1 (default: GOMAXPROCS)
  --parallel N       completions in flight at once, 1..1024 (default 4); one more gets 503
  --max-tokens N     largest max_tokens a request may ask for, 1..4096 (default 4096)
  --max-prompt N     longest prompt in tokens, 1..32768 (default 32768)
  --max-body N       largest request body in bytes, 1024..1073741824 (default 1048576; 413 above)
  -h, --help         this help

Each request runs its own session of the one model, and the requests in flight share walks over
the weights: their decode steps and prompt chunks go through the layers together, each streamed
piece of the trunk and each fetched expert read once for all of them, every completion bit for
bit what it is alone (the plan's "shared walks" line bounds the rows of one walk and its memory).
A client that disconnects cancels its generation. SIGINT or SIGTERM stops accepting connections,
lets the requests in flight finish and exits 0; a second signal kills the process.

` + budgetUsage}

// serveOptions is a validated serve command line.
type serveOptions struct {
	modelDir, tokDir, host, apiKey, alias string
	port, threads                         int
	limits                                serve.Limits
	budget                                budget
}

func parseServe(a *args) (*serveOptions, error) {
	o := &serveOptions{modelDir: a.pos[0], host: "127.0.0.1", tokDir: a.vals["--tok"], alias: a.vals["--alias"]}
	if h, ok := a.vals["--host"]; ok {
		o.host = h
	}
	o.port = a.int("--port", 8080, 0, 65535)
	o.threads = a.int("--threads", runtime.GOMAXPROCS(0), 1, 4096)
	o.limits = serve.Limits{
		MaxConcurrent:   a.int("--parallel", serve.DefaultMaxConcurrent, 1, 1024),
		MaxTokens:       a.int("--max-tokens", maxGen, 1, maxGen),
		MaxPromptTokens: a.int("--max-prompt", maxPrompt, 1, maxPrompt),
		MaxBodyBytes:    int64(a.int("--max-body", serve.DefaultMaxBodyBytes, 1024, 1<<30)),
	}
	o.budget = parseBudget(a)
	if a.err != nil {
		return nil, a.err
	}
	if a.has("--api-key") && a.has("--api-key-file") {
		return nil, usagef("--api-key-file", "conflicts with --api-key: give one")
	}
	o.apiKey = a.vals["--api-key"]
	if f, ok := a.vals["--api-key-file"]; ok {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, usagef("--api-key-file", "%v", err)
		}
		if o.apiKey, _, _ = strings.Cut(string(b), "\n"); strings.TrimSpace(o.apiKey) == "" {
			return nil, usagef("--api-key-file", "%s: the first line is empty", f)
		}
		o.apiKey = strings.TrimSuffix(o.apiKey, "\r")
	}
	if o.tokDir == "" {
		if !tokenizer.InDir(o.modelDir) {
			return nil, usagef("--tok", "%s holds no %s and %s: give the tokenizer directory", o.modelDir, tokenizer.RanksFileName, tokenizer.ConfigFileName)
		}
		o.tokDir = o.modelDir
	}
	if o.alias == "" {
		o.alias = filepath.Base(filepath.Clean(o.modelDir))
	}
	return o, nil
}

// loopbackOnly reports whether every address host names is a loopback address. A name is
// resolved: "localhost" mapped to a routable address in /etc/hosts is not loopback.
func loopbackOnly(host string) (bool, error) {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	if host == "" {
		return false, nil // every interface
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return false, nil
		}
	}
	return len(addrs) > 0, nil
}

func serveMain(a *args, stdout, stderr io.Writer) int {
	o, err := parseServe(a)
	if err != nil {
		return a.usage(stderr, err)
	}
	return serveModel(o, stderr, nil, nil)
}

// serveModel runs the server until a signal (from sigs, or the process's when sigs is nil) has
// drained it. ready, when not nil, learns the address listened on (tests).
func serveModel(o *serveOptions, stderr io.Writer, sigs chan os.Signal, ready func(addr string)) int {
	// The bind is checked before anything is loaded: refusing a key-less public server after
	// minutes of loading would be a poor way to say so.
	loop, err := loopbackOnly(o.host)
	if err != nil {
		return usageFail(stderr, "serve", usagef("--host", "%v", err))
	}
	if !loop && o.apiKey == "" {
		return usageFail(stderr, "serve", usagef("--host", "%q is not a loopback address: give --api-key (or --api-key-file) so that only clients with the key are served", o.host))
	}
	enc, err := loadTokenizer(o.tokDir, stderr)
	if err != nil {
		return failed(stderr, exitRuntime, err)
	}
	cfg, err := config.Load(o.budget.config(o.modelDir))
	if err != nil {
		return failed(stderr, openExit(err), err)
	}
	if o.budget.layers > cfg.NumLayers {
		return usageFail(stderr, "serve", usagef("--layers", "%d is more than the configuration's %d layers", o.budget.layers, cfg.NumLayers))
	}
	if err := o.budget.resolve(o.modelDir); err != nil {
		return failed(stderr, openExit(err), err)
	}
	opts := append(o.budget.options(), k3.WithThreads(o.threads))
	plan, err := k3.PlanFor(o.modelDir, opts...)
	if err != nil {
		return failed(stderr, openExit(err), err)
	}
	fmt.Fprintf(stderr, "k3 serve: memory plan\n  %s\n", strings.ReplaceAll(plan.String(), "\n", "\n  "))
	// What the requests in flight may add on top of the plan: each holds a session.
	perReq := plan.KDAStateBytes + plan.MLABytesPerPosition*int64(o.limits.MaxPromptTokens+o.limits.MaxTokens+1)
	fmt.Fprintf(stderr, "k3 serve: sessions: at most %d in flight, each at most %.1f MB of state\n", o.limits.MaxConcurrent, float64(perReq)/1e6)
	defer o.budget.lowGC()() // at the floor preset, as run does
	m, err := k3.Open(o.modelDir, opts...)
	if err != nil {
		return failed(stderr, openExit(err), err)
	}
	defer m.Close()
	for _, w := range m.Warnings() {
		fmt.Fprintf(stderr, "k3 serve: warning: %s\n", w)
	}
	o.budget.settle()
	stop, dropped := k3.DefaultStop(enc, cfg)
	if len(dropped) > 0 {
		fmt.Fprintf(stderr, "k3 serve: note: default stop ids %v are outside the vocabulary [0, %d) and cannot occur\n", dropped, cfg.Vocab)
	}
	srv, err := serve.New(serve.Options{Model: m, Tokens: enc, ModelID: o.alias, APIKey: o.apiKey, Stop: stop,
		Limits: o.limits, Log: log.New(stderr, "k3 serve: ", log.LstdFlags)})
	if err != nil {
		return failed(stderr, exitRuntime, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.port)))
	if err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("serve: %w", err))
	}
	// No ReadTimeout or WriteTimeout: a completion may stream for many minutes on a budget, and a
	// read deadline would also end the server's watch for a client that goes away. The header
	// has its own timeout; the handler puts one on reading the body.
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: log.New(stderr, "k3 serve: http: ", log.LstdFlags)}
	addr := ln.Addr().String()
	auth := "no API key: loopback only"
	if o.apiKey != "" {
		auth = "API key required"
	}
	fmt.Fprintf(stderr, "k3 serve: model %q, listening on http://%s (%s)\n", o.alias, addr, auth)
	if ready != nil {
		ready(addr)
	}

	// The first signal closes the listener and waits for the requests in flight (Shutdown);
	// onSignal restores the default action, so a second one kills the process.
	drained := make(chan error, 1)
	stopWatch := onSignal(sigs, func(s os.Signal) {
		fmt.Fprintf(stderr, "k3 serve: %v: draining %d requests in flight\n", s, srv.Stats().Active)
		drained <- hs.Shutdown(context.Background())
	})
	defer stopWatch()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return failed(stderr, exitRuntime, fmt.Errorf("serve: %w", err))
	}
	if err := <-drained; err != nil {
		return failed(stderr, exitRuntime, fmt.Errorf("serve: shutdown: %w", err))
	}
	st := srv.Stats()
	fmt.Fprintf(stderr, "k3 serve: drained; %d completions served, %d cancelled, %d failed, %d refused busy; %d walks carried %d rows\n",
		st.Completed, st.Cancelled, st.Failed, st.Busy, st.Walks, st.WalkRows)
	return exitOK
}
