package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
				return failed(stderr, exitRuntime, err)
			}
		} else {
			if enc, err = bundled.GetEncoding(a.vals["--encoding"]); errors.Is(err, bundled.ErrUnknown) {
				return a.usage(stderr, usagef("--encoding", "%v", err))
			}
			if err != nil {
				return failed(stderr, exitRuntime, err)
			}
		}
		in, err := io.ReadAll(io.LimitReader(stdin, maxTokenizeInput+1))
		if err != nil {
			return failed(stderr, exitRuntime, fmt.Errorf("tokenize: reading stdin: %w", err))
		}
		if len(in) > maxTokenizeInput {
			return failed(stderr, exitUsage, fmt.Errorf("tokenize: stdin is larger than %d bytes", maxTokenizeInput))
		}
		if a.has("--decode") {
			return decodeIDs(enc, in, stdout, stderr)
		}
		if !utf8.Valid(in) {
			return failed(stderr, exitUsage, fmt.Errorf("tokenize: stdin is not valid UTF-8"))
		}
		mode := tokenizer.AllowSpecial
		if a.has("--ordinary") {
			mode = tokenizer.NoSpecial
		}
		ids, err := enc.Encode(string(in), mode)
		if err != nil {
			return failed(stderr, exitUsage, fmt.Errorf("tokenize: %w", err))
		}
		b := make([]byte, 0, 8*len(ids)+1)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		if _, err := stdout.Write(append(b, '\n')); err != nil {
			return failed(stderr, exitRuntime, err)
		}
		fmt.Fprintf(stderr, "k3 tokenize: %d bytes -> %d ids (%s)\n", len(in), len(ids), enc.Name())
		return exitOK
	}
}

// decodeIDs reads the --ids form (one line; a trailing newline is allowed) and prints the text.
func decodeIDs(enc *tokenizer.Encoding, in []byte, stdout, stderr io.Writer) int {
	s := strings.TrimSuffix(strings.TrimSuffix(string(in), "\n"), "\r")
	ids, err := parseIDList("stdin", s, maxTokenizeInput)
	var text string
	if err == nil {
		text, err = enc.Decode(ids)
	}
	if err != nil {
		return failed(stderr, exitUsage, fmt.Errorf("tokenize --decode: %w", err))
	}
	if _, err := io.WriteString(stdout, text); err != nil {
		return failed(stderr, exitRuntime, err)
	}
	return exitOK
}

// loadTokenizer reads dir/tiktoken.model and dir/tokenizer_config.json. A rank file that is not
// the released Kimi one is a warning on w, not a refusal: a user may run a modified vocabulary.
func loadTokenizer(dir string, w io.Writer) (*tokenizer.Encoding, error) {
	enc, err := tokenizer.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--tok: %w", err)
	}
	// k3 synth's tokenizer is a prefix of o200k_base on purpose: nothing to warn about.
	if !enc.IsKimiReference() && synthNote(filepath.Join(dir, tokenizer.ConfigFileName)) == "" {
		d := enc.Ranks().Digest()
		fmt.Fprintf(w, "k3: warning: %s in %s (SHA-256 %x) is not the released Kimi rank file (SHA-256 %s); ids may not match the model's\n",
			tokenizer.RanksFileName, dir, d[:], tokenizer.KimiRanksSHA256)
	}
	return enc, nil
}

// synthNote returns the k3_synthetic key that k3 synth writes into tokenizer_config.json, or "".
func synthNote(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var c struct {
		Note string `json:"k3_synthetic"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Note
}

// encodePrompt turns the prompt text into ids as the Kimi reference tokenizer does
// (tokenization_kimi.py's encode: every special name is recognised, nothing is added, no chat
// template). flag names the source in errors.
func encodePrompt(enc *tokenizer.Encoding, flag, text string) ([]int, error) {
	ids, err := enc.Encode(text, tokenizer.AllowSpecial)
	if err != nil {
		var ue *tokenizer.InvalidUTF8Error
		if errors.As(err, &ue) {
			return nil, usagef(flag, "invalid UTF-8 at byte %d", ue.Offset)
		}
		return nil, usagef(flag, "%v", err)
	}
	if len(ids) == 0 {
		return nil, usagef(flag, "the prompt encodes to no tokens")
	}
	if len(ids) > maxPrompt {
		return nil, usagef(flag, "the prompt encodes to %d ids, at most %d allowed", len(ids), maxPrompt)
	}
	return ids, nil
}
