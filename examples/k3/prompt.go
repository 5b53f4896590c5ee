package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/k3-project/k3/tokenizer"
)

// tokLoadError is a tokenizer that could not be loaded; it is a runtime failure (exit 1), unlike
// a prompt that the loaded tokenizer refuses (exit 2).
type tokLoadError struct{ err error }

func (e *tokLoadError) Error() string { return "--tok: " + e.err.Error() }
func (e *tokLoadError) Unwrap() error { return e.err }

// loadTokenizer reads dir/tiktoken.model and dir/tokenizer_config.json. A rank file that is not
// the released Kimi one is a warning on w, not a refusal: a user may run a modified vocabulary.
func loadTokenizer(dir string, w io.Writer) (*tokenizer.Encoding, error) {
	enc, err := tokenizer.LoadDir(dir)
	if err != nil {
		return nil, &tokLoadError{err}
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

// readPromptFile reads --prompt-file. An unreadable file is a bad argument (exit 2): nothing has
// been started yet and the user has to fix the command line.
func readPromptFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usagef("--prompt-file", "%v", err)
	}
	if !utf8.Valid(b) {
		return "", usagef("--prompt-file", "%s is not valid UTF-8", path)
	}
	return string(b), nil
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
