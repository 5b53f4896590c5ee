package checkpoint

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/o200k"
)

// Files of the tokenizer Synthesize writes next to the checkpoint (the Kimi layout, §10.1).
const (
	SynthTokenizerRanksFile  = "tiktoken.model"
	SynthTokenizerConfigFile = "tokenizer_config.json"
)

// SynthTokenizerRanks returns how many byte-pair ranks the tokenizer Synthesize writes for a model
// vocabulary of vocab ids: vocab − 256, so that the ranks and the 256 specials (ids N..N+255)
// cover the vocabulary exactly; but at least 256, because a Kimi rank file must hold every single
// byte. For vocab < 512 (the tiny geometry's 256) the tokenizer is therefore larger than the
// model's vocabulary: the model can emit only byte tokens and its specials lie outside it (a
// prompt naming one is refused by the model's id check).
func SynthTokenizerRanks(vocab int) int { return max(vocab-tokenizer.KimiNumSpecials, 256) }

// synthSpecials are the K3 special names by offset from N (§10.2); the other offsets get
// the loader's reserved names.
var synthSpecials = map[int]string{
	0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>", 5: "<|sep|>",
	6: "[start_header_id]", 7: "[end_header_id]", 9: "[EOT]", 65: "<osagent_mode>",
	254: "[UNK]", 255: "[PAD]",
}

// SynthesisStagingDir returns the directory Synthesize writes into before renaming it to dir: a
// hidden sibling of dir. A program interrupted while Synthesize runs may remove it; otherwise the
// next Synthesize call for the same dir removes it.
func SynthesisStagingDir(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".k3-synth-partial")
}

// synthesize writes the checkpoint and its tokenizer into a staging directory next to dir and
// renames it into place, so an interrupted run never leaves a half-written dir: the next run
// finds only its own staging directory, which it removes and rebuilds.
func synthesize(dir string, g geometry, seed int64, progress func(done, total int64)) error {
	dir = filepath.Clean(dir)
	if err := checkEmptyTarget(dir); err != nil {
		return err
	}
	staging := SynthesisStagingDir(dir)
	if err := os.RemoveAll(staging); err != nil { // a previous run's leftover
		return fmt.Errorf("checkpoint: synthesize: removing a previous partial output: %w", err)
	}
	err := writeSynth(staging, g, seed, progress)
	if err == nil {
		err = writeSynthTokenizer(staging, g.Config.Vocab)
	}
	if err == nil {
		err = moveInto(staging, dir)
	}
	if err != nil {
		os.RemoveAll(staging)
		return fmt.Errorf("checkpoint: synthesize %s into %s: %w", g.Name, dir, err)
	}
	return nil
}

// checkEmptyTarget refuses a dir that exists and is not an empty directory.
func checkEmptyTarget(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("checkpoint: synthesize: %w", err)
	case len(ents) > 0:
		return fmt.Errorf("checkpoint: synthesize: %w: %s holds %d entries", ErrDirNotEmpty, dir, len(ents))
	}
	return nil
}

// moveInto renames the finished staging directory to dir, replacing dir when it is an empty
// directory (os.Remove refuses a non-empty one, so nothing written meanwhile is lost).
func moveInto(staging, dir string) error {
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(staging, dir)
}

// writeSynthTokenizer writes tiktoken.model (the first SynthTokenizerRanks(vocab) ranks of
// o200k_base: a prefix of a trained BPE list is itself a valid BPE, every token's parts having
// lower ranks) and a tokenizer_config.json naming the K3 specials at N..N+255.
func writeSynthTokenizer(dir string, vocab int) error {
	n := SynthTokenizerRanks(vocab)
	if n > o200k.NumRanks {
		return fmt.Errorf("tokenizer: vocabulary %d needs %d ranks, o200k_base has %d", vocab, n, o200k.NumRanks)
	}
	ranks, err := o200k.Ranks()
	if err != nil {
		return err
	}
	var b []byte
	for i := range n {
		tok, _ := ranks.Token(i)
		b = base64.StdEncoding.AppendEncode(b, tok)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, SynthTokenizerRanksFile), b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, SynthTokenizerConfigFile), synthTokenizerConfig(n), 0o644)
}

// synthTokenizerConfig lists all 256 specials in added_tokens_decoder with the fields of the
// released file, in id order (json.Marshal would sort the keys as strings).
func synthTokenizerConfig(n int) []byte {
	q := func(s string) string {
		var sb strings.Builder
		e := json.NewEncoder(&sb)
		e.SetEscapeHTML(false) // "<|end_of_msg|>" as written, not \u003c
		e.Encode(s)
		return strings.TrimSuffix(sb.String(), "\n")
	}
	name := func(off int) string {
		if s, ok := synthSpecials[off]; ok {
			return s
		}
		return "<|reserved_token_" + strconv.Itoa(n+off) + "|>"
	}
	b := []byte("{\n  \"added_tokens_decoder\": {\n")
	for off := range tokenizer.KimiNumSpecials {
		b = fmt.Appendf(b, "    %q: {\"content\": %s, \"lstrip\": false, \"normalized\": false, \"rstrip\": false, \"single_word\": false, \"special\": true}",
			strconv.Itoa(n+off), q(name(off)))
		if off < tokenizer.KimiNumSpecials-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	b = fmt.Appendf(b, "  },\n  \"bos_token\": \"[BOS]\",\n  \"eos_token\": \"[EOS]\",\n  \"pad_token\": \"[PAD]\",\n  \"unk_token\": \"[UNK]\",\n")
	b = fmt.Appendf(b, "  \"tokenizer_class\": \"TikTokenTokenizer\",\n  \"k3_synthetic\": %s\n}\n",
		q(fmt.Sprintf("ranks 0..%d are the first %d of o200k_base; specials %d..%d", n-1, n, n, n+tokenizer.KimiNumSpecials-1)))
	return b
}
