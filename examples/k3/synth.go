package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

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

var synthCmd = command{name: "synth", npos: 2, what: "<geometry> <dir>", main: synth, flags: flagSpec{"--seed": true}, help: `usage: k3 synth <geometry> <dir> [--seed N]

Writes a random checkpoint of the geometry (k3 --list-geometries) into dir, which must be absent
or empty, in the released layout, with a Kimi-layout tokenizer sized to its vocabulary
(tiktoken.model: the first vocab-256 ranks of o200k_base, at least 256; tokenizer_config.json:
the K3 specials at ids N..N+255), so "k3 run <dir> --tok <dir> --prompt TEXT" works. The bytes
are a pure function of (geometry, seed). Output is staged beside dir and renamed into place: an
interrupted run leaves nothing in dir, and the rerun starts afresh.

  -s, --seed N 0..9223372036854775807 (default 1)
  -h, --help   this help
`}

// synth is `k3 synth <geometry> <dir>`.
func synth(a *args, stdout, stderr io.Writer) int {
	seed := int64(a.int("--seed", 1, 0, math.MaxInt64))
	geometry, dir := a.pos[0], a.pos[1]
	if a.err == nil {
		a.check(checkGeometry(geometry))
	}
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	// Synthesis cannot be resumed, and the partial output of a large geometry would stay on
	// disk until the next run for the same directory: a signal removes it. It is renamed first,
	// so the writer, still running, can create no new file under the old path (files it holds
	// open vanish when it exits).
	staging := checkpoint.SynthesisStagingDir(dir)
	stop := onSignal(nil, func(s os.Signal) {
		trash := staging + ".removing-" + strconv.Itoa(os.Getpid())
		if os.Rename(staging, trash) == nil {
			os.RemoveAll(trash)
		}
		fmt.Fprintf(stderr, "k3 synth: interrupted; removed the partial output %s\n", staging)
		os.Exit(signalExit(s))
	})
	// The small geometries take a moment; a bar would only flicker.
	report, finish := reportTo(stderr, "k3 synth "+geometry, 64<<20)
	err := checkpoint.SynthesizeProgress(dir, geometry, seed, report)
	finish()
	stop()
	if err != nil {
		return synthFailed(stderr, err)
	}
	fmt.Fprintf(stdout, "wrote geometry %s (seed %d) and its tokenizer to %s\n", geometry, seed, dir)
	return exitOK
}

// synthFailed reports a failed synthesis: a target directory that is not empty is a command
// line naming a directory that cannot be used (exit 2).
func synthFailed(stderr io.Writer, err error) int {
	fail(stderr, err)
	if errors.Is(err, checkpoint.ErrDirNotEmpty) {
		return exitUsage
	}
	return exitRuntime
}

// checkGeometry refuses a geometry that synthesis does not know, naming the ones it does.
func checkGeometry(name string) error {
	var names []string
	for _, g := range checkpoint.Geometries() {
		if g.Name == name {
			return nil
		}
		names = append(names, g.Name)
	}
	return usagef("", "unknown geometry %q (known: %s)", name, strings.Join(names, ", "))
}

var demoCmd = command{name: "demo", npos: 0, what: "no positional arguments", main: demo,
	flags: flagSpec{"--gen": true, "--seed": true, "--keep": true, "--threads": true, "--prompt": true, "--json": false, "--quiet": false},
	help: `usage: k3 demo [-p TEXT] [-n N] [--seed N] [--threads N] [--keep DIR] [--json]

Synthesizes the tiny geometry (with its tokenizer) into a temporary directory, or into DIR with
--keep, and continues a prompt from it, writing the generated text on stdout as k3 run does.
The tiny vocabulary is 256 ids, all single bytes, and its weights are random, so the text is a
random byte string.

  -p, --prompt TEXT  prompt text (default "Hello"; special names such as [EOS] lie outside the
                     tiny vocabulary)
  -n, --n-predict N, --gen N
                     tokens to generate, 0..64 (default 8)
  -s, --seed N       synthesis seed (default 1)
  -t, --threads N    worker goroutines (default: GOMAXPROCS)
  --keep DIR         write the checkpoint to DIR (absent or empty) and keep it
  --json             the JSON run report on stdout instead of the text
  -q, --quiet        no diagnostics on stderr
  -h, --help         this help
`}

// cmdDemo is the setup-free path of the README: synthesize the tiny geometry into a temporary
// directory and decode a few tokens from it, printing the report to stdout.
func demo(a *args, stdout, stderr io.Writer) int {
	gen := a.int("--gen", 8, 0, 64)
	seed := a.int("--seed", 1, 0, math.MaxInt32)
	threads := a.int("--threads", runtime.GOMAXPROCS(0), 1, 4096)
	if a.err != nil {
		return a.usage(stderr, a.err)
	}
	dir := a.vals["--keep"]
	if dir == "" {
		tmp, err := os.MkdirTemp("", "k3-demo-*")
		if err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("demo: %w", err))
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := checkpoint.Synthesize(dir, "tiny", int64(seed)); err != nil {
		return synthFailed(stderr, err)
	}
	if !a.has("--quiet") {
		fmt.Fprintf(stderr, "k3: demo: synthesized geometry tiny (seed %d) in %s\n", seed, dir)
	}
	o := &runOptions{modelDir: dir, promptText: cmp.Or(a.vals["--prompt"], "Hello"), promptFlag: "--prompt", tokDir: dir,
		gen: gen, incremental: true, threads: threads, noStop: true, quiet: a.has("--quiet"), gf: genOptions{ctx: maxTotal}}
	if a.has("--json") {
		o.out = "-"
	}
	return decode(o, stdout, stderr, nil)
}

var packTrunkCmd = command{name: "pack-trunk", npos: 2, what: "<model_dir> <out_dir>", main: packTrunk,
	flags: flagSpec{"--format": true}, help: `usage: k3 pack-trunk <model_dir> <out_dir> [--format bf16|lossless12]

Copies every layer's dense (trunk) tensors into out_dir/trunk.bin and writes trunk.json, the
packed trunk that "k3 run --trunk out_dir" streams from. Progress goes to stderr: a bar (bytes,
rate, ETA) on a terminal, plain lines otherwise.

  --format F   bf16 (default): the tensors as the checkpoint stores them; lossless12: every bf16
               matrix in about 11.4 bits a weight, decoded bit-exactly for the kernels (one
               that would not shrink stays bf16; trunk.json records each tensor's format)
  -h, --help   this help
`}

// packTrunk is `k3 pack-trunk <model_dir> <out_dir>`.
func packTrunk(a *args, stdout, stderr io.Writer) int {
	format := a.vals["--format"]
	switch format {
	case "", "bf16", "lossless12":
	default:
		return usageFail(stderr, a.cmd, usagef("--format", "%q is not bf16 or lossless12", format))
	}
	start := time.Now()
	report, finish := reportTo(stderr, "k3 pack-trunk", 0)
	err := checkpoint.PackTrunk(a.pos[0], a.pos[1], report, checkpoint.WithTrunkFormat(format))
	finish()
	if err != nil {
		return failed(stderr, exitRuntime, err)
	}
	fmt.Fprintf(stdout, "packed the trunk of %s into %s in %.1f s\n", a.pos[0], a.pos[1], time.Since(start).Seconds())
	return exitOK
}
