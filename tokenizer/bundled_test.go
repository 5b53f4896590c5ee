package tokenizer_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/cl100k"
	"github.com/k3-project/k3/tokenizer/o200k"
)

// bundled is one encoding package with its rank file embedded, as its API exposes it.
type bundled struct {
	key      string // the fixture's name for it
	name     string
	sha      string
	numRanks int
	rankFile string // the embedded file, relative to this directory
	split    tokenizer.SplitRule
	specials func() map[string]int
	ranks    func() (*tokenizer.Ranks, error)
	encoding func() (*tokenizer.Encoding, error)
}

var bundledEncodings = []bundled{
	{"cl100k", cl100k.Name, cl100k.RanksSHA256, cl100k.NumRanks, "cl100k/cl100k_base.tiktoken",
		tokenizer.SplitCL100K, cl100k.Specials, cl100k.Ranks, cl100k.Encoding},
	{"o200k", o200k.Name, o200k.RanksSHA256, o200k.NumRanks, "o200k/o200k_base.tiktoken",
		tokenizer.SplitO200K, o200k.Specials, o200k.Ranks, o200k.Encoding},
}

// TestBundledRankFiles: each package's embedded ranks are the published file (its digest and
// count), and Encoding builds once.
func TestBundledRankFiles(t *testing.T) {
	for _, b := range bundledEncodings {
		t.Run(b.key, func(t *testing.T) {
			r, err := b.ranks()
			require.NoError(t, err)
			d := r.Digest()
			assert.Equal(t, b.sha, hex.EncodeToString(d[:]))
			assert.Equal(t, b.numRanks, r.Len())
			raw, err := os.ReadFile(filepath.FromSlash(b.rankFile))
			require.NoError(t, err)
			sum := sha256.Sum256(raw)
			assert.Equal(t, b.sha, hex.EncodeToString(sum[:]))

			enc, err := b.encoding()
			require.NoError(t, err)
			assert.Equal(t, b.name, enc.Name())
			assert.Equal(t, b.split, enc.Split())
			again, err := b.encoding()
			require.NoError(t, err)
			assert.Same(t, enc, again, "Encoding builds once")
		})
	}
}

// TestBundledMatchFixture: each package's specials are the fixture's (tiktoken's), and every
// fixture case encodes to tiktoken's ids in both modes and decodes back to its bytes.
func TestBundledMatchFixture(t *testing.T) {
	dir := testkit.Path(t, "tokenizer")
	var encs map[string]struct {
		RankSHA256 string         `json:"rank_file_sha256"`
		Specials   map[string]int `json:"special_tokens"`
		Expected   string         `json:"expected"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "encodings.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &encs))
	var cases []struct{ ID, File string }
	raw, err = os.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &cases))

	for _, b := range bundledEncodings {
		t.Run(b.key, func(t *testing.T) {
			fe, ok := encs[b.key]
			require.True(t, ok, "the fixture lists %s", b.key)
			assert.Equal(t, fe.RankSHA256, b.sha)
			assert.Equal(t, fe.Specials, b.specials())
			want := expectedIDs(t, filepath.Join(dir, filepath.FromSlash(fe.Expected)))
			require.Len(t, want, len(cases))
			enc, err := b.encoding()
			require.NoError(t, err)
			for _, c := range cases {
				text, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(c.File)))
				require.NoError(t, err)
				ord, err := enc.Encode(string(text), tokenizer.NoSpecial)
				require.NoError(t, err, c.ID)
				assert.Equal(t, want[c.ID].Ordinary, nonNil(ord), "case %s ordinary", c.ID)
				sp, err := enc.Encode(string(text), tokenizer.AllowSpecial)
				require.NoError(t, err, c.ID)
				assert.Equal(t, want[c.ID].WithSpecial, nonNil(sp), "case %s with_special", c.ID)
				back, err := enc.DecodeBytes(sp)
				require.NoError(t, err, c.ID)
				assert.Equal(t, text, nonNil(back), "case %s round trip", c.ID)
			}
		})
	}
}

type expectedRow struct {
	ID          string `json:"id"`
	Ordinary    []int  `json:"ordinary"`
	WithSpecial []int  `json:"with_special"`
}

// expectedIDs reads a fixture's expected ids (JSON lines) by case id.
func expectedIDs(t *testing.T, path string) map[string]expectedRow {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	want := map[string]expectedRow{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r expectedRow
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		want[r.ID] = r
	}
	require.NoError(t, sc.Err())
	return want
}

// nonNil makes an empty result compare equal to the fixture's empty JSON array.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
