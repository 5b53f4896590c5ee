package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Version is printed by --version.
const Version = "k3 0.1.0"

// Exit codes of §11.1.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
	exitInvalid = 4 // the run finished but a routed expert could not be loaded ("RUN INVALID")
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand: its flags, its --help text, its positional arguments and what it
// does with a parsed command line.
type command struct {
	name  string
	flags flagSpec
	help  string
	// npos is the number of positional arguments (-1: the command checks them itself); what
	// names them in the message when the count is wrong.
	npos int
	what string
	main func(a *args, stdout, stderr io.Writer) int
}

// run parses the command line and runs the command. Help is printed on stdout with exit 0; a
// wrong command line is reported on stderr with exit 2.
func (c *command) run(argv []string, stdout, stderr io.Writer) int {
	a, err := parseArgs(argv, c.flags)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, c.help)
		return exitOK
	}
	if err == nil && c.npos >= 0 && len(a.pos) != c.npos {
		err = usagef("", "expected %s, got %d positional arguments", c.what, len(a.pos))
	}
	if err != nil {
		return usageFail(stderr, c.name, err)
	}
	a.cmd = c.name
	return c.main(a, stdout, stderr)
}

// usageFail reports a command-line mistake naming the subcommand and returns exit code 2.
func usageFail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "k3 %s: %v (k3 %s --help for usage)\n", cmd, err, cmd)
	return exitUsage
}

// fail reports a runtime or validation failure. Library errors already start with their
// package's prefix ("k3: ..."), so the CLI adds its own only to messages that lack one.
func fail(stderr io.Writer, err error) {
	msg := err.Error()
	if !strings.HasPrefix(msg, "k3: ") && !strings.HasPrefix(msg, "k3 ") {
		msg = "k3: " + msg
	}
	fmt.Fprintln(stderr, msg)
}

// failed reports err as fail does and returns code, for the paths that end there.
func failed(stderr io.Writer, code int, err error) int {
	fail(stderr, err)
	return code
}

// run dispatches the subcommands; it returns the process exit code so tests can call it.
func run(argv []string, stdout, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch argv[0] {
	case "-h", "--help", "help":
		if len(argv) > 1 && argv[0] == "help" {
			if c, ok := commands[argv[1]]; ok {
				fmt.Fprint(stdout, c.help)
				return exitOK
			}
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	case "--version", "version":
		fmt.Fprintln(stdout, Version)
		return exitOK
	case "--list-geometries":
		return listGeometries(stdout)
	case "--list-presets":
		return listPresets(stdout, stderr)
	}
	if c, ok := commands[argv[0]]; ok {
		return c.run(argv[1:], stdout, stderr)
	}
	if strings.HasPrefix(argv[0], "-") && !isHelp(argv[0]) && len(argv) == 1 {
		fmt.Fprintf(stderr, "k3: %s: unknown flag or command (k3 --help for usage)\n", argv[0])
		return exitUsage
	}
	if notCommand(argv[0]) {
		if near := nearest(argv[0], slices.Collect(maps.Keys(commands))); near != "" {
			fmt.Fprintf(stderr, "k3: unknown command %q (did you mean %s?)\n", argv[0], near)
			return exitUsage
		}
	}
	return runCmd.run(argv, stdout, stderr)
}

// notCommand reports whether the first word, which names no command, cannot be the model
// directory of the "k3 <model_dir>" shorthand either: a bare word (no path separator) that
// names nothing on disk. When it is close to a command's name, the typo gets a suggestion
// instead of a run over a directory that does not exist.
func notCommand(word string) bool {
	if strings.HasPrefix(word, "-") || strings.ContainsRune(word, filepath.Separator) || word == "." || word == ".." {
		return false
	}
	_, err := os.Stat(word)
	return errors.Is(err, fs.ErrNotExist)
}

// commands are the subcommands by name.
var commands = map[string]*command{
	"run": &runCmd, "synth": &synthCmd, "demo": &demoCmd, "info": &infoCmd,
	"tokenize": &tokenizeCmd, "verify": &verifyCmd, "pack-trunk": &packTrunkCmd,
	"ladder": &ladderCmd, "plan": &planCmd, "doctor": &doctorCmd, "sim-cache": &simCacheCmd,
	"compress-experts": &compressExpertsCmd, "verify-experts": &verifyExpertsCmd,
	"chat":  &chatCmd,
	"serve": &serveCmd,
}

const usage = `usage:
  k3 run <model_dir> -p TEXT [-n N] [flags]
                                          continue the text; the generated text goes to stdout
                                          (also: k3 <model_dir> ..., --ids 1,2,3 for ids)
  k3 chat <model_dir> [flags]             a conversation on one session (k3 run -i)
  k3 serve <model_dir> [--host H] [--port P] [--api-key KEY]
                                          an OpenAI-compatible server (/v1/completions)
  k3 synth <geometry> <dir> [--seed N]    write a synthetic checkpoint and its tokenizer
  k3 demo [-p TEXT] [-n N] [--json]       synthesize the tiny geometry in a temp dir and decode from it
  k3 info <model_dir>                     parameter and byte counts, per-session state sizes (JSON)
  k3 info <model_dir> --trunk-stats       what lossless12 makes of every trunk matrix, without packing
  k3 plan <model_dir> [--preset NAME | --trunk-gb X --cache-gb Y] [--json]
                                          the memory plan, itemised, without loading weights
  k3 doctor [model_dir]                   RAM and disk bandwidth -> preset, expected s/token,
                                          the command to run
  k3 pack-trunk <model_dir> <out_dir>     copy every layer's dense tensors into trunk.bin + trunk.json
  k3 sim-cache <expert_trace.bin> [--expert-bytes N] [--disk-mbs X]
                                          replay a trace under LRU, S3-FIFO, Belady, PIN+LRU (§9.7)
  k3 ladder <model_dir> --budgets LIST    one run per trunk budget (GB, floor, all, mapped), each in its
                                          own process: peak RSS, s/token, bytes read, identical ids
  k3 tokenize --tok DIR [--decode]        text on stdin -> ids on stdout (or ids -> text)
  k3 compress-experts <model_dir> <out_dir>  entropy-code the routed experts (lossless)
  k3 verify-experts <dir>                 decode every coded expert and check the manifest
  k3 verify <model_dir> [--manifest FILE | --write-manifest FILE] [--trunk DIR]
                                          shard sizes against the index; sha256 digests; a packed
                                          trunk's layer checksums and lossless12 blocks
  k3 --help | --version | --list-presets | --list-geometries
  k3 help <command> (or k3 <command> --help) for a command's flags

exit codes: 0 ok, 2 usage/validation, 1 runtime failure, 4 a routed expert failed to load,
            130/143 interrupted
`

// onSignal calls handle with the first SIGINT or SIGTERM (from sigs, or the process's when sigs
// is nil) after restoring their default action, so that a second one kills the process. stop
// ends the watch; it waits for a handle already running, so that a handler which exits the
// process is not raced by the caller reporting the errors the signal caused.
func onSignal(sigs chan os.Signal, handle func(os.Signal)) (stop func()) {
	if sigs == nil {
		sigs = make(chan os.Signal, 2)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case s := <-sigs:
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			handle(s)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-finished
	}
}

// signalExit is the exit code of a process interrupted by s (128 + the signal number).
func signalExit(s os.Signal) int {
	if s == syscall.SIGTERM {
		return 143
	}
	return 130
}
