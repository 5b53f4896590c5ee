package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/bundled"
)

var tokenizeCmd = command{name: "tokenize", npos: 0, what: "no positional arguments (input is read from stdin)", main: tokenize(os.Stdin),
	flags: flagSpec{"--tok": true, "--encoding": true, "--decode": false, "--ordinary": false},
	help: `usage: k3 tokenize (--tok DIR | --encoding NAME) [--decode] [--ordinary] < input

Encodes the UTF-8 text on stdin and prints its ids on stdout, comma separated on one line (the
form --ids takes). With --decode, reads such an id list on stdin and prints the text.

  --tok DIR        Kimi tokenizer directory (tiktoken.model + tokenizer_config.json), as k3 run
                   uses it; k3 synth writes one next to every synthetic checkpoint
  --encoding NAME  a built-in encoding instead: cl100k_base or o200k_base (tiktoken's)
  --decode         ids on stdin -> text on stdout (invalid UTF-8 replaced as Python's
                   errors="replace" does)
  --ordinary       special names are plain text (the default follows the Kimi reference and
                   turns every special name into its id)
  -h, --help       this help

Input is limited to 64 MiB. Exit codes: 0 ok; 2 usage error or input the tokenizer refuses
(invalid UTF-8, an id it does not know); 1 the tokenizer cannot be loaded.
`}

// maxTokenizeInput bounds stdin.
const maxTokenizeInput = 64 << 20

// tokenize is `k3 tokenize`, reading stdin.
func tokenize(stdin io.Reader) func(a *args, stdout, stderr io.Writer) int {
	return func(a *args, stdout, stderr io.Writer) int {
		return tokenizeMain(a, stdin, stdout, stderr)
	}
}

func tokenizeMain(a *args, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case a.has("--tok") == a.has("--encoding"):
		return a.usage(stderr, usagef("--tok", "give exactly one of --tok DIR and --encoding NAME"))
	case a.has("--decode") && a.has("--ordinary"):
		return a.usage(stderr, usagef("--ordinary", "applies to encoding, not to --decode"))
	}
	var enc *tokenizer.Encoding
	var err error
	if dir := a.vals["--tok"]; dir != "" {
		if enc, err = loadTokenizer(dir, stderr); err != nil {
			fail(stderr, err)
			return exitRuntime
		}
	} else {
		if enc, err = bundled.GetEncoding(a.vals["--encoding"]); errors.Is(err, bundled.ErrUnknown) {
			return a.usage(stderr, usagef("--encoding", "%v", err))
		}
		if err != nil {
			fail(stderr, err)
			return exitRuntime
		}
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxTokenizeInput+1))
	if err != nil {
		fail(stderr, fmt.Errorf("tokenize: reading stdin: %w", err))
		return exitRuntime
	}
	if len(in) > maxTokenizeInput {
		fail(stderr, fmt.Errorf("tokenize: stdin is larger than %d bytes", maxTokenizeInput))
		return exitUsage
	}
	if a.has("--decode") {
		return decodeIDs(enc, in, stdout, stderr)
	}
	if !utf8.Valid(in) {
		fail(stderr, fmt.Errorf("tokenize: stdin is not valid UTF-8"))
		return exitUsage
	}
	mode := tokenizer.AllowSpecial
	if a.has("--ordinary") {
		mode = tokenizer.NoSpecial
	}
	ids, err := enc.Encode(string(in), mode)
	if err != nil {
		fail(stderr, fmt.Errorf("tokenize: %w", err))
		return exitUsage
	}
	b := make([]byte, 0, 8*len(ids)+1)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	if _, err := stdout.Write(append(b, '\n')); err != nil {
		fail(stderr, err)
		return exitRuntime
	}
	fmt.Fprintf(stderr, "k3 tokenize: %d bytes -> %d ids (%s)\n", len(in), len(ids), enc.Name())
	return exitOK
}

// decodeIDs reads the --ids form (one line; a trailing newline is allowed) and prints the text.
func decodeIDs(enc *tokenizer.Encoding, in []byte, stdout, stderr io.Writer) int {
	s := strings.TrimSuffix(strings.TrimSuffix(string(in), "\n"), "\r")
	ids, err := parseIDList("stdin", s, maxTokenizeInput)
	if err != nil {
		fail(stderr, fmt.Errorf("tokenize --decode: %w", err))
		return exitUsage
	}
	text, err := enc.Decode(ids)
	if err != nil {
		fail(stderr, fmt.Errorf("tokenize --decode: %w", err))
		return exitUsage
	}
	if _, err := io.WriteString(stdout, text); err != nil {
		fail(stderr, err)
		return exitRuntime
	}
	return exitOK
}
