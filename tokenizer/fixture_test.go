package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

type fixtureEncoding struct {
	RankFile     string         `json:"rank_file"`
	RankSHA256   string         `json:"rank_file_sha256"`
	NRanks       int            `json:"n_ranks"`
	Pattern      string         `json:"pattern"`
	Specials     map[string]int `json:"special_tokens"`
	Expected     string         `json:"expected"`
	Splits       string         `json:"splits"`
	name         string
	enc          *Encoding
	expectedRows map[string]expectedRow
	splitRows    map[string]splitRow
}

// fixtureCase is one text of cases.json.
type fixtureCase = testkit.TextCase

type expectedRow struct {
	ID          string `json:"id"`
	Ordinary    []int  `json:"ordinary"`
	WithSpecial []int  `json:"with_special"`
}

type splitRow struct {
	ID                string   `json:"id"`
	Pieces            []string `json:"pieces"`
	WithSpecialPieces []string `json:"with_special_pieces"`
	SpecialIndices    []int    `json:"special_indices"`
}

type fixtureSet struct {
	encs  []*fixtureEncoding
	cases []fixtureCase
	err   error
}

var (
	fixOnce sync.Once
	fix     fixtureSet
	ranksMu sync.Mutex
	ranksBy = map[string]*Ranks{}
)

// loadFixtures reads the tokenizer fixture folder once per test binary.
func loadFixtures(tb testing.TB) *fixtureSet {
	tb.Helper()
	dir := testkit.Path(tb, "tokenizer")
	fixOnce.Do(func() { fix = readFixtures(dir) })
	if fix.err != nil {
		tb.Fatal(fix.err)
	}
	return &fix
}

func readFixtures(dir string) fixtureSet {
	var fs fixtureSet
	data, err := os.ReadFile(filepath.Join(dir, "encodings.json"))
	if err != nil {
		return fixtureSet{err: err}
	}
	var encs map[string]*fixtureEncoding
	if err := json.Unmarshal(data, &encs); err != nil {
		return fixtureSet{err: err}
	}
	if fs.cases, err = testkit.ReadTextCases(dir); err != nil {
		return fixtureSet{err: err}
	}
	names := make([]string, 0, len(encs))
	for name := range encs {
		names = append(names, name)
	}
	sortStrings(names)
	for _, name := range names {
		fe := encs[name]
		fe.name = name
		ranksMu.Lock()
		r := ranksBy[fe.RankFile]
		if r == nil {
			r, err = LoadRanks(filepath.Join(dir, fe.RankFile))
			if err != nil {
				ranksMu.Unlock()
				return fixtureSet{err: err}
			}
			ranksBy[fe.RankFile] = r
		}
		ranksMu.Unlock()
		rule, err := SplitRuleForPattern(fe.Pattern)
		if err != nil {
			return fixtureSet{err: err}
		}
		fe.enc, err = New(Spec{Name: name, Ranks: r, Split: rule, Specials: fe.Specials})
		if err != nil {
			return fixtureSet{err: err}
		}
		if fe.expectedRows, err = rowsByID(filepath.Join(dir, fe.Expected), func(r *expectedRow) string { return r.ID }); err != nil {
			return fixtureSet{err: err}
		}
		if fe.splitRows, err = rowsByID(filepath.Join(dir, fe.Splits), func(r *splitRow) string { return r.ID }); err != nil {
			return fixtureSet{err: err}
		}
		fs.encs = append(fs.encs, fe)
	}
	return fs
}

// rowsByID reads a JSON-lines file of rows, keyed by id.
func rowsByID[T any](path string, id func(*T) string) (map[string]T, error) {
	rows := map[string]T{}
	err := testkit.JSONLines(path, func(row T) error {
		rows[id(&row)] = row
		return nil
	})
	return rows, err
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func equalInts(a, b []int) (int, bool) {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i, false
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b)), false
	}
	return -1, true
}

// eachCase runs check on every case with its row of rows (read from file
// for the encoding named enc) and returns how many passed; a case the file
// lacks is an error.
func eachCase[R any](t *testing.T, cases []fixtureCase, rows map[string]R, enc, file string, check func(fixtureCase, R) bool) int {
	t.Helper()
	passed := 0
	for _, c := range cases {
		row, ok := rows[c.ID]
		if !ok {
			t.Errorf("%s: case %s missing from %s", enc, c.ID, file)
			continue
		}
		if check(c, row) {
			passed++
		}
	}
	return passed
}

// TestFixtureIDs checks every case of cases.json under every encoding of
// encodings.json in both modes against the oracle's ids, and that decoding
// gives back the case's bytes.
func TestFixtureIDs(t *testing.T) {
	fs := loadFixtures(t)
	for _, fe := range fs.encs {
		if fe.enc.Ranks().Len() != fe.NRanks {
			t.Errorf("%s: %d ranks, want %d", fe.name, fe.enc.Ranks().Len(), fe.NRanks)
		}
		passed := eachCase(t, fs.cases, fe.expectedRows, fe.name, fe.Expected, func(c fixtureCase, row expectedRow) bool {
			good := true
			for _, m := range []struct {
				name string
				mode Mode
				want []int
			}{{"ordinary", NoSpecial, row.Ordinary}, {"with_special", AllowSpecial, row.WithSpecial}} {
				got, err := fe.enc.Encode(c.Text, m.mode)
				if err != nil {
					t.Errorf("%s case %s %s: %v", fe.name, c.ID, m.name, err)
					good = false
					continue
				}
				if i, ok := equalInts(got, m.want); !ok {
					lo, hi := max(0, i-3), min(i+4, len(got), len(m.want))
					t.Errorf("%s case %s (%s) %s: ids differ at %d of %d/%d: got %v want %v", fe.name, c.ID, c.Category, m.name, i, len(got), len(m.want), got[lo:min(hi, len(got))], m.want[lo:min(hi, len(m.want))])
					good = false
				}
				back, err := fe.enc.DecodeBytes(m.want)
				if err != nil || string(back) != c.Text {
					t.Errorf("%s case %s %s: decode does not round-trip (err %v)", fe.name, c.ID, m.name, err)
					good = false
				}
			}
			return good
		})
		t.Logf("%s: %d/%d cases pass in both modes", fe.name, passed, len(fs.cases))
	}
}

// TestFixtureSplits checks the pre-tokenizer's pieces against the splits
// files, in both modes, for every encoding.
func TestFixtureSplits(t *testing.T) {
	fs := loadFixtures(t)
	for _, fe := range fs.encs {
		passed := eachCase(t, fs.cases, fe.splitRows, fe.name, fe.Splits, func(c fixtureCase, row splitRow) bool {
			got, err := fe.enc.Split().Split(c.Text)
			if err != nil {
				t.Fatal(err)
			}
			good := comparePieces(t, fe.name+" case "+c.ID+" ordinary", got, row.Pieces)
			// with_special: cut at special names, split each stretch alone.
			var ws []string
			var idx []int
			s := c.Text
			for len(s) > 0 {
				at, k := fe.enc.specials.find(s, 0)
				if at < 0 {
					break
				}
				p, _ := fe.enc.Split().Split(s[:at])
				ws = append(ws, p...)
				idx = append(idx, len(ws))
				ws = append(ws, fe.enc.specials.names[k])
				s = s[at+len(fe.enc.specials.names[k]):]
			}
			p, _ := fe.enc.Split().Split(s)
			ws = append(ws, p...)
			good = comparePieces(t, fe.name+" case "+c.ID+" with_special", ws, row.WithSpecialPieces) && good
			if _, ok := equalInts(idx, row.SpecialIndices); !ok && len(idx)+len(row.SpecialIndices) > 0 {
				t.Errorf("%s case %s: special indices %v, want %v", fe.name, c.ID, idx, row.SpecialIndices)
				good = false
			}
			return good
		})
		t.Logf("%s: %d/%d cases split as the oracle does in both modes", fe.name, passed, len(fs.cases))
	}
}

func comparePieces(t *testing.T, what string, got, want []string) bool {
	t.Helper()
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			lo := max(0, i-2)
			t.Errorf("%s: piece %d differs: got %q want %q (context got %q want %q)", what, i, got[i], want[i], got[lo:min(i+3, len(got))], want[lo:min(i+3, len(want))])
			return false
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d pieces, want %d", what, len(got), len(want))
		return false
	}
	return true
}

// TestFixtureRejectSpecial: RejectSpecial refuses exactly the cases that
// contain a special name (found here with strings.Index), at the first
// occurrence, and otherwise equals the ordinary ids.
func TestFixtureRejectSpecial(t *testing.T) {
	fs := loadFixtures(t)
	for _, fe := range fs.encs {
		refused := 0
		for _, c := range fs.cases {
			first, name := -1, ""
			for n := range fe.Specials {
				if at := strings.Index(c.Text, n); at >= 0 && (first < 0 || at < first) {
					first, name = at, n
				}
			}
			ids, err := fe.enc.Encode(c.Text, RejectSpecial)
			if first < 0 {
				if err != nil {
					t.Errorf("%s case %s: %v", fe.name, c.ID, err)
				} else if _, ok := equalInts(ids, fe.expectedRows[c.ID].Ordinary); !ok {
					t.Errorf("%s case %s: RejectSpecial ids differ from ordinary", fe.name, c.ID)
				}
				continue
			}
			refused++
			var de *DisallowedSpecialError
			if !errors.As(err, &de) || de.Offset != first || de.Name != name {
				t.Errorf("%s case %s: got %v, want refusal of %q at %d", fe.name, c.ID, err, name, first)
			}
		}
		t.Logf("%s: %d cases refused under RejectSpecial", fe.name, refused)
	}
}
