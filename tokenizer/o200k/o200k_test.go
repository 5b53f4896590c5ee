package o200k_test

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

	"github.com/k3-project/k3/internal/fixtures"
	"github.com/k3-project/k3/tokenizer"
	"github.com/k3-project/k3/tokenizer/o200k"
)

// TestEmbeddedFile: the embedded ranks are the published file (the fixture's digest and count).
func TestEmbeddedFile(t *testing.T) {
	r, err := o200k.Ranks()
	require.NoError(t, err)
	d := r.Digest()
	assert.Equal(t, o200k.RanksSHA256, hex.EncodeToString(d[:]))
	assert.Equal(t, o200k.NumRanks, r.Len())
	raw, err := os.ReadFile("o200k_base.tiktoken")
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	assert.Equal(t, o200k.RanksSHA256, hex.EncodeToString(sum[:]))
}

// TestMatchesFixture: the specials are the fixture's (tiktoken's) and every fixture case encodes
// to tiktoken's ids in both modes and decodes back to its bytes.
func TestMatchesFixture(t *testing.T) {
	dir := fixtures.Path(t, "tokenizer")
	var encs map[string]struct {
		RankSHA256 string         `json:"rank_file_sha256"`
		Specials   map[string]int `json:"special_tokens"`
		Expected   string         `json:"expected"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "encodings.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &encs))
	fe := encs["o200k"]
	assert.Equal(t, fe.RankSHA256, o200k.RanksSHA256)
	assert.Equal(t, fe.Specials, o200k.Specials())

	var cases []struct{ ID, File string }
	b, err = os.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cases))
	type row struct {
		ID          string `json:"id"`
		Ordinary    []int  `json:"ordinary"`
		WithSpecial []int  `json:"with_special"`
	}
	want := map[string]row{}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(fe.Expected)))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r row
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		want[r.ID] = r
	}
	require.NoError(t, sc.Err())
	require.Len(t, want, len(cases))

	enc, err := o200k.Encoding()
	require.NoError(t, err)
	assert.Equal(t, "o200k_base", enc.Name())
	assert.Equal(t, tokenizer.SplitO200K, enc.Split())
	again, err := o200k.Encoding()
	require.NoError(t, err)
	assert.Same(t, enc, again, "Encoding builds once")
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
		assert.Equal(t, text, nonNilB(back), "case %s round trip", c.ID)
	}
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

func nonNilB(s []byte) []byte {
	if s == nil {
		return []byte{}
	}
	return s
}
