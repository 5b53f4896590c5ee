package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/k3-project/k3/checkpoint"
)

func listGeometries(stdout io.Writer) int {
	w := 0
	for _, g := range checkpoint.Geometries() {
		w = max(w, len(g.Name))
	}
	for _, g := range checkpoint.Geometries() {
		fmt.Fprintf(stdout, "%-*s  %s\n", w, g.Name, g.Description)
	}
	return exitOK
}

var synthCmd = command{name: "synth", flags: flagSpec{"--seed": true}, help: `usage: k3 synth <geometry> <dir> [--seed N]

Writes a random checkpoint of the geometry (k3 --list-geometries) into dir, which must be absent
or empty, in the released layout, with a Kimi-layout tokenizer sized to its vocabulary
(tiktoken.model: the first vocab-256 ranks of o200k_base, at least 256; tokenizer_config.json:
the K3 specials at ids N..N+255), so "k3 run <dir> --tok <dir> --prompt TEXT" works. The bytes
are a pure function of (geometry, seed). Output is staged beside dir and renamed into place: an
interrupted run leaves nothing in dir, and the rerun starts afresh.

  --seed N     0..9223372036854775807 (default 1)
  -h, --help   this help
`}

func cmdSynth(argv []string, stdout, stderr io.Writer) int {
	a, code, ok := synthCmd.parse(argv, stdout, stderr)
	if !ok {
		return code
	}
	var err error
	if len(a.pos) != 2 {
		err = usagef("", "expected <geometry> <dir>, got %d positional arguments (geometries: %s)", len(a.pos), geometryNames())
	}
	var seed int64 = 1
	if err == nil {
		if s, ok := a.vals["--seed"]; ok {
			var v int
			v, err = parseInt("--seed", s, 0, math.MaxInt64)
			seed = int64(v)
		}
	}
	if err == nil && !knownGeometry(a.pos[0]) {
		err = usagef("", "unknown geometry %q (known: %s)", a.pos[0], geometryNames())
	}
	if err != nil {
		return synthCmd.usageFail(stderr, err)
	}
	stop := removeOnSignal(checkpoint.SynthesisStagingDir(a.pos[1]), stderr)
	// The small geometries take a moment; a bar would only flicker.
	report, finish := reportTo(stderr, "k3 synth "+a.pos[0], 64<<20)
	err = checkpoint.SynthesizeProgress(a.pos[1], a.pos[0], seed, report)
	finish()
	stop()
	if err != nil {
		fail(stderr, err)
		if errors.Is(err, checkpoint.ErrDirNotEmpty) {
			return exitUsage // the command line names a directory that cannot be used
		}
		return exitRuntime
	}
	fmt.Fprintf(stdout, "wrote geometry %s (seed %d) and its tokenizer to %s\n", a.pos[0], seed, a.pos[1])
	return exitOK
}

// removeOnSignal removes the staging directory and exits 130/143 when SIGINT or SIGTERM arrives
// before stop is called: synthesis cannot be resumed, and the partial output of a large geometry
// would otherwise stay on disk until the next run for the same directory.
func removeOnSignal(staging string, stderr io.Writer) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			// Renamed first: the writer, still running, can create no new file under the old
			// path, so the removal is complete (files it holds open vanish when it exits).
			trash := staging + ".removing-" + strconv.Itoa(os.Getpid())
			if os.Rename(staging, trash) == nil {
				os.RemoveAll(trash)
			}
			fmt.Fprintf(stderr, "k3 synth: interrupted; removed the partial output %s\n", staging)
			os.Exit(signalExit(s))
		case <-done:
			close(finished)
		}
	}()
	// stop waits for the goroutine: when a signal is being handled, the write errors it causes
	// must not be reported (the goroutine exits the process instead).
	return func() {
		signal.Stop(sigs)
		close(done)
		<-finished
	}
}

func geometryNames() string {
	var names []string
	for _, g := range checkpoint.Geometries() {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

func knownGeometry(name string) bool {
	for _, g := range checkpoint.Geometries() {
		if g.Name == name {
			return true
		}
	}
	return false
}

var demoCmd = command{name: "demo", flags: flagSpec{"--gen": true, "--seed": true, "--keep": true, "--threads": true, "--prompt": true},
	help: `usage: k3 demo [--prompt TEXT] [--gen N] [--seed N] [--threads N] [--keep DIR]

Synthesizes the tiny geometry (with its tokenizer) into a temporary directory, or into DIR with
--keep, and decodes from it incrementally, printing the JSON report on stdout. With --prompt the
text is encoded by the synthesized tokenizer and generated_text is filled; otherwise the prompt
is the ids 1,2,3,4,5. The tiny vocabulary is 256 ids, all single bytes, so the generated text
of these random weights is a random byte string.

  --prompt TEXT  prompt text (special names such as [EOS] lie outside the tiny vocabulary)
  --gen N        tokens to generate, 0..64 (default 8)
  --seed N       synthesis seed (default 1)
  --threads N    worker goroutines (default: GOMAXPROCS)
  --keep DIR     write the checkpoint to DIR (absent or empty) and keep it
  -h, --help     this help
`}

// cmdDemo is the setup-free path of the README: synthesize the tiny geometry into a temporary
// directory and decode a few tokens from it, printing the report to stdout.
func cmdDemo(argv []string, stdout, stderr io.Writer) int {
	a, code, ok := demoCmd.parse(argv, stdout, stderr)
	if !ok {
		return code
	}
	var err error
	if len(a.pos) != 0 {
		err = usagef("", "demo takes no positional arguments")
	}
	gen, seed, threads := 8, 1, defaultThreads()
	if err == nil {
		if s, ok := a.vals["--gen"]; ok {
			gen, err = parseInt("--gen", s, 0, 64)
		}
	}
	if err == nil {
		if s, ok := a.vals["--seed"]; ok {
			seed, err = parseInt("--seed", s, 0, math.MaxInt32)
		}
	}
	if err == nil {
		if s, ok := a.vals["--threads"]; ok {
			threads, err = parseInt("--threads", s, 1, 4096)
		}
	}
	if err != nil {
		return demoCmd.usageFail(stderr, err)
	}
	dir := a.vals["--keep"]
	if dir == "" {
		tmp, err := os.MkdirTemp("", "k3-demo-*")
		if err != nil {
			fail(stderr, fmt.Errorf("demo: %w", err))
			return exitRuntime
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := checkpoint.Synthesize(dir, "tiny", int64(seed)); err != nil {
		fail(stderr, err)
		if errors.Is(err, checkpoint.ErrDirNotEmpty) {
			return exitUsage
		}
		return exitRuntime
	}
	fmt.Fprintf(stderr, "k3: demo: synthesized geometry tiny (seed %d) in %s\n", seed, dir)
	o := &runOptions{modelDir: dir, ids: []int{1, 2, 3, 4, 5}, promptFlag: "--ids", gen: gen, incremental: true,
		threads: threads, noStop: true, out: "-"}
	if s, ok := a.vals["--prompt"]; ok {
		o.ids, o.promptText, o.promptFlag, o.tokDir = nil, s, "--prompt", dir
	}
	return decode(o, stdout, stderr, nil)
}
