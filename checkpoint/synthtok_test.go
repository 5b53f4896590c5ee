package checkpoint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/tokenizer"
)

// TestSynthTokenizerLoads: the written files load with tokenizer.LoadKimi for the vocabularies of
// every geometry, the specials sit at N..N+255 with the K3 names, and text round-trips.
func TestSynthTokenizerLoads(t *testing.T) {
	for _, g := range knownGeometries() {
		t.Run(g.Name, func(t *testing.T) {
			vocab := g.Config.Vocab
			dir := t.TempDir()
			require.NoError(t, writeSynthTokenizer(dir, vocab))
			enc, err := tokenizer.LoadKimi(filepath.Join(dir, SynthTokenizerRanksFile), filepath.Join(dir, SynthTokenizerConfigFile))
			require.NoError(t, err)
			n := SynthTokenizerRanks(vocab)
			assert.Equal(t, n, enc.Ranks().Len())
			assert.Equal(t, max(vocab, 512), enc.VocabSize())
			sp := enc.SpecialTokens()
			assert.Equal(t, n, sp["[BOS]"])
			assert.Equal(t, n+1, sp["[EOS]"])
			assert.Equal(t, n+2, sp["<|end_of_msg|>"])
			assert.Equal(t, n+255, sp["[PAD]"])
			if len(g.Config.EOSTokenIDs) > 0 {
				assert.Equal(t, []int{n + 2}, g.Config.EOSTokenIDs, "config eos is <|end_of_msg|>")
			}
			text := "Hello, world! Über 中文 123[EOS]"
			ids, err := enc.Encode(text, tokenizer.AllowSpecial)
			require.NoError(t, err)
			assert.Equal(t, n+1, ids[len(ids)-1])
			back, err := enc.Decode(ids)
			require.NoError(t, err)
			assert.Equal(t, text, back)
			if vocab >= 512 {
				for _, id := range ids {
					assert.Less(t, id, vocab)
				}
			}
		})
	}
}

// TestSynthTokenizerPrefixIsBPE: in the prefix written for the perf vocabulary every multi-byte
// token is the merge of two lower-ranked tokens, so BPE can reach it without the whole-piece
// shortcut (the claim that makes a prefix a valid smaller BPE).
func TestSynthTokenizerPrefixIsBPE(t *testing.T) {
	g, ok := lookupGeometry("perf")
	require.True(t, ok)
	dir := t.TempDir()
	require.NoError(t, writeSynthTokenizer(dir, g.Config.Vocab))
	r, err := tokenizer.LoadRanks(filepath.Join(dir, SynthTokenizerRanksFile))
	require.NoError(t, err)
	for i := 0; i < r.Len(); i++ {
		tok, _ := r.Token(i)
		if len(tok) == 1 {
			continue
		}
		split := false
		for k := 1; k < len(tok) && !split; k++ {
			a, okA := r.Rank(tok[:k])
			b, okB := r.Rank(tok[k:])
			split = okA && okB && a < i && b < i
		}
		if !split {
			t.Fatalf("rank %d %q is not a merge of two lower ranks", i, tok)
		}
	}
}

func TestSynthesizeStaging(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "m")
	staging := filepath.Join(parent, ".m.k3-synth-partial")
	// What an interrupted run leaves behind: a partial staging directory.
	require.NoError(t, os.MkdirAll(staging, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(staging, ".model-00001-of-00003.safetensors.123.tmp"), []byte("partial"), 0o644))
	require.NoError(t, Synthesize(dir, "tiny", 1))
	_, err := os.Stat(staging)
	assert.ErrorIs(t, err, os.ErrNotExist, "staging directory removed")
	for _, f := range []string{"config.json", "model.safetensors.index.json", SynthTokenizerRanksFile, SynthTokenizerConfigFile} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	// An existing empty directory is replaced; a non-empty one is refused and left alone.
	empty := filepath.Join(parent, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	require.NoError(t, Synthesize(empty, "tiny", 1))
	err = Synthesize(dir, "tiny", 1)
	require.ErrorIs(t, err, ErrDirNotEmpty)
	assert.Regexp(t, `^checkpoint: synthesize: synth: target directory is not empty`, err.Error())
	// A failure leaves neither dir nor staging.
	blocked := filepath.Join(parent, "file")
	require.NoError(t, os.WriteFile(blocked, nil, 0o644))
	err = Synthesize(filepath.Join(blocked, "m"), "tiny", 1)
	require.Error(t, err)
	assert.NoFileExists(t, filepath.Join(blocked, ".m.k3-synth-partial"))
}

// TestRankDataLinkedOnlyWhenUsed: a program that opens a model (k3 imports this package for its
// integrity checks) but never calls Synthesize does not carry the 3.6 MB o200k rank file (nothing
// at package level refers to it); one that calls Synthesize does. The programs are built through a -overlay file, so nothing is written into the
// source tree.
func TestRankDataLinkedOnlyWhenUsed(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds two programs")
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	tmp := t.TempDir()
	// A line from the middle of o200k_base.tiktoken: rank 149999.
	const marker = "IGthdHRlbg== 149999"
	for _, c := range []struct {
		name, pkg, call string
		linked          bool
	}{
		{"open", "github.com/k3-project/k3", `_, err := k3.Open("x"); fmt.Println(err)`, false},
		{"synth", "github.com/k3-project/k3/checkpoint", `fmt.Println(checkpoint.Synthesize("x", "tiny", 1))`, true},
	} {
		src := filepath.Join(tmp, c.name+".go")
		prog := "package main\n\nimport (\n\t\"fmt\"\n\n\t\"" + c.pkg + "\"\n)\n\nfunc main() { " + c.call + " }\n"
		require.NoError(t, os.WriteFile(src, []byte(prog), 0o644))
		virtual := filepath.Join(wd, "internal", "linkcheck"+c.name, "main.go")
		overlay := filepath.Join(tmp, c.name+".json")
		require.NoError(t, os.WriteFile(overlay, []byte(`{"Replace":{`+strconv.Quote(virtual)+`:`+strconv.Quote(src)+`}}`), 0o644))
		bin := filepath.Join(tmp, c.name)
		out, err := exec.Command("go", "build", "-overlay", overlay, "-o", bin, "./internal/linkcheck"+c.name).CombinedOutput()
		require.NoError(t, err, "%s", out)
		b, err := os.ReadFile(bin)
		require.NoError(t, err)
		assert.Equal(t, c.linked, bytes.Contains(b, []byte(marker)), "%s: o200k data linked", c.name)
	}
}
