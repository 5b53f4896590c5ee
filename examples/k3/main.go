package main

import (
	"fmt"
	"io"
	"os"
)

// Version is printed by --version.
const Version = "k3 0.1.0"

// Exit codes of SPEC §11.1.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
	exitInvalid = 4 // the run finished but a routed expert could not be loaded ("RUN INVALID")
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches the subcommands; it returns the process exit code so tests can call it.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, Version)
		return exitOK
	case "--list-geometries":
		return listGeometries(stdout)
	case "synth":
		return cmdSynth(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(args[1:], stdout, stderr)
	case "info":
		return cmdInfo(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr, nil)
	case "compress-experts", "verify-experts":
		return cmdExperts(args[0], args[1:], stdout, stderr)
	}
	return cmdRun(args, stdout, stderr, nil)
}

const usage = `usage:
  k3 <model_dir> --ids 1,2,3 [flags]     greedy decoding (also: k3 run <model_dir> ...)
  k3 <model_dir> --tok DIR --prompt TEXT [flags]
  k3 synth <geometry> <dir> [--seed N]    write a synthetic checkpoint (see --list-geometries)
  k3 demo [--gen N] [--seed N]            synthesize the tiny geometry in a temp dir and decode from it
  k3 info <model_dir>                     parameter and byte counts, per-session state sizes (JSON)
  k3 --help | --version | --list-geometries

decode flags:
  --ids LIST         prompt token ids, comma separated
  --prompt TEXT      prompt text, encoded with --tok as the Kimi reference does (special names
                     become their ids; no chat template, nothing added)
  --prompt-file PATH prompt text read from a UTF-8 file
                     (exactly one of --ids, --prompt, --prompt-file is required)
  --tok DIR          Kimi tokenizer directory (tiktoken.model + tokenizer_config.json); needed by
                     --prompt/--prompt-file, and with it generated_text holds the decoded output
  --gen N            tokens to generate, 0..4096 (default 8)
  --incremental      carry KDA state, conv tails and the MLA latent cache (default: full recompute)
  --threads N        worker goroutines, >= 1 (default: GOMAXPROCS)
  --stop-ids LIST    stop after emitting any of these ids (default: the tokenizer's [EOS] and
                     <|end_of_msg|> when --tok is given, plus the config's eos_token_id)
  --no-stop          never stop early
  --out FILE         JSON report path (default k3_run.json; "-" for stdout)
  --dump-logits FILE write the step-0 logits as little-endian float32 x vocab
  --tf-check         teacher-forced agreement over --ids instead of generating

exit codes: 0 ok, 2 usage/validation, 1 runtime failure, 4 a routed expert failed to load,
            130/143 interrupted
`
