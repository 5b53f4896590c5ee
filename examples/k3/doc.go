// Command k3 runs a Kimi K3 checkpoint (or a synthetic one) on the CPU through the public API of
// github.com/k3-project/k3 only. k3 --help lists its commands (run, plan, doctor, pack-trunk,
// ladder, sim-cache, synth, demo, info, tokenize, verify, compress-experts, verify-experts) with
// their synopses, and k3 help COMMAND gives a command's flags; this comment is what they share.
//
// Every subcommand answers -h/--help anywhere on its command line (before a "--"; a value that
// is literally "--help" is written --flag=--help), and unknown flags are reported with the
// subcommand's name. Flags apply in argv order (later wins). Decoding is incremental by default;
// --full-recompute recomputes the whole sequence every step (for checks), and --incremental is
// accepted as a no-op.
//
// run writes the generated text, and nothing else, to stdout as it is produced; the plan,
// progress and summary go to stderr (-q silences them) and the JSON report is written only with
// --out. llama.cpp's flag names are accepted beside the long ones (-p, -f, -n, --temp, -t, -s,
// -c, -r, ...), and a mistyped command or flag is answered with the nearest known name. k3 chat
// (run -i) keeps one session across lines, prefilling only each new line.
//
// Text prompts need a tokenizer: --tok DIR, or by default the model directory when it holds the
// Kimi tiktoken.model and tokenizer_config.json (k3 synth writes both next to every synthetic
// checkpoint). The text is
// encoded as the reference tokenizer.encode does (special names become their ids, no chat
// template, no BOS/EOS added); a rank file other than the released one is reported as a warning.
// With a tokenizer, the JSON report's generated_text is the complete decoded output (invalid
// UTF-8 replaced as Python's errors="replace" does), the per-step table shows each token's text,
// and the default stop set is the tokenizer's [EOS] and <|end_of_msg|> plus the config's
// eos_token_id, less any id outside the vocabulary (--stop-ids replaces it and must name ids in
// [0, vocab); --no-stop empties it).
//
// Before any weights load, run checks that --out, --dump-logits and --save-state can be written, reads and
// validates config.json and checks the prompt and stop ids against its vocabulary.
//
// The presets (laptop, desktop, workstation, server, max, floor, auto; --list-presets) come from
// package preset and are chosen with run/plan --preset NAME; a --trunk-gb or --cache-gb later on
// the command line overrides the preset's figure, an earlier one is overridden by it. auto reads
// this machine's memory through package sysmem (MemAvailable and cgroup v1/v2 limits).
//
// run prints the memory plan before allocating, one line per token when stderr is not a terminal
// or with -v (index, id, seconds, the true resident hit rate of that token's expert requests,
// the bytes the trunk and the expert store read for it, and its text with a tokenizer), the
// layers of any forward pass longer than 2 s, and a closing summary (s/token, the run's true hit
// rate, the I/O share of the wall clock, trunk and expert bytes and rates, peak RSS from
// getrusage). plan prints the same plan without loading weights; a budget below the floor is
// refused with exit 2 by both. doctor measures memory and the model file system's read
// bandwidth and prints the preset to use, a lower bound on s/token from I/O and the command to
// run. sim-cache and ladder draw their results with gonum.org/v1/plot (--plot, SVG or PNG).
//
// Exit codes (§11.1): 0 success (also help, version, lists); 2 usage or validation error
// (an unknown flag, a malformed number, an id outside the vocabulary, an unwritable output path,
// a config.json that fails validation, a synth target that is not empty, an unreadable
// --prompt-file or manifest); 1 runtime failure (open, bind, forward, tokenizer load or decode,
// a verify check that fails); 4 a routed expert could not be loaded; 130/143 interrupted by
// SIGINT/SIGTERM after writing the report (with --out) for the tokens so far.
//
// It imports only public packages of the module (its tests add internal/testkit), never the
// internal or layer packages, so that it shows what a user of the library can do. It is a module
// of its own (go.mod with a replace to the library), so its plotting and progress-bar
// dependencies stay out of the library's module graph: from the repository root,
// go -C examples/k3 run . demo.
package main
