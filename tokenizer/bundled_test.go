package tokenizer_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
			if err != nil {
				t.Fatal(err)
			}
			d := r.Digest()
			if got := hex.EncodeToString(d[:]); got != b.sha {
				t.Errorf("digest of the parsed ranks %s, want %s", got, b.sha)
			}
			if r.Len() != b.numRanks {
				t.Errorf("%d ranks, want %d", r.Len(), b.numRanks)
			}
			raw, err := os.ReadFile(filepath.FromSlash(b.rankFile))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(raw)
			if got := hex.EncodeToString(sum[:]); got != b.sha {
				t.Errorf("SHA-256 of %s is %s, want %s", b.rankFile, got, b.sha)
			}

			enc, err := b.encoding()
			if err != nil {
				t.Fatal(err)
			}
			if enc.Name() != b.name || enc.Split() != b.split {
				t.Errorf("encoding %s with split %v, want %s with %v", enc.Name(), enc.Split(), b.name, b.split)
			}
			again, err := b.encoding()
			if err != nil {
				t.Fatal(err)
			}
			if enc != again {
				t.Error("Encoding built twice")
			}
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
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &encs); err != nil {
		t.Fatal(err)
	}
	var cases []struct{ ID, File string }
	raw, err = os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}

	for _, b := range bundledEncodings {
		t.Run(b.key, func(t *testing.T) {
			fe, ok := encs[b.key]
			if !ok {
				t.Fatalf("the fixture lists %s", b.key)
			}
			if b.sha != fe.RankSHA256 {
				t.Errorf("rank file SHA-256 %s, the fixture's %s", b.sha, fe.RankSHA256)
			}
			if !maps.Equal(b.specials(), fe.Specials) {
				t.Errorf("specials %v, the fixture's %v", b.specials(), fe.Specials)
			}
			want := expectedIDs(t, filepath.Join(dir, filepath.FromSlash(fe.Expected)))
			if len(want) != len(cases) {
				t.Fatalf("%d expected rows for %d cases", len(want), len(cases))
			}
			enc, err := b.encoding()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				text, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(c.File)))
				if err != nil {
					t.Fatal(err)
				}
				ord, err := enc.Encode(string(text), tokenizer.NoSpecial)
				if err != nil {
					t.Fatalf("case %s: %v", c.ID, err)
				}
				if !slices.Equal(ord, want[c.ID].Ordinary) {
					t.Errorf("case %s ordinary: %v, want %v", c.ID, ord, want[c.ID].Ordinary)
				}
				sp, err := enc.Encode(string(text), tokenizer.AllowSpecial)
				if err != nil {
					t.Fatalf("case %s: %v", c.ID, err)
				}
				if !slices.Equal(sp, want[c.ID].WithSpecial) {
					t.Errorf("case %s with_special: %v, want %v", c.ID, sp, want[c.ID].WithSpecial)
				}
				back, err := enc.DecodeBytes(sp)
				if err != nil {
					t.Fatalf("case %s: %v", c.ID, err)
				}
				if !bytes.Equal(back, text) {
					t.Errorf("case %s round trip: %q, want %q", c.ID, back, text)
				}
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
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]expectedRow{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r expectedRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		want[r.ID] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}
