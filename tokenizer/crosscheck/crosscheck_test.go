package crosscheck

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	tiktoken "github.com/pkoukk/tiktoken-go"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/tokenizer"
)

// encoding is one encoding of the fixtures' encodings.json, built with
// package tokenizer, and its oracle ids (tiktoken's, in ordinary mode).
type encoding struct {
	name     string
	RankFile string         `json:"rank_file"`
	Pattern  string         `json:"pattern"`
	Specials map[string]int `json:"special_tokens"`
	Expected string         `json:"expected"`
	enc      *tokenizer.Encoding
	ordinary map[string][]int // case id -> ids
}

type fixtureSet struct {
	encs  []*encoding
	cases []testkit.TextCase
}

var (
	fixOnce sync.Once
	fix     fixtureSet
	fixErr  error
)

// load reads the tokenizer fixtures once per test binary.
func load(tb testing.TB) *fixtureSet {
	tb.Helper()
	dir := testkit.Path(tb, "tokenizer")
	fixOnce.Do(func() { fix, fixErr = read(dir) })
	if fixErr != nil {
		tb.Fatal(fixErr)
	}
	return &fix
}

func read(dir string) (fixtureSet, error) {
	var fs fixtureSet
	var encs map[string]*encoding
	if err := readJSON(filepath.Join(dir, "encodings.json"), &encs); err != nil {
		return fs, err
	}
	var err error
	if fs.cases, err = testkit.ReadTextCases(dir); err != nil {
		return fs, err
	}
	ranks := map[string]*tokenizer.Ranks{}
	for _, name := range slices.Sorted(maps.Keys(encs)) {
		e := encs[name]
		e.name = name
		r := ranks[e.RankFile]
		if r == nil {
			var err error
			if r, err = tokenizer.LoadRanks(filepath.Join(dir, e.RankFile)); err != nil {
				return fs, err
			}
			ranks[e.RankFile] = r
		}
		rule, err := tokenizer.SplitRuleForPattern(e.Pattern)
		if err != nil {
			return fs, err
		}
		if e.enc, err = tokenizer.New(tokenizer.Spec{Name: name, Ranks: r, Split: rule, Specials: e.Specials}); err != nil {
			return fs, err
		}
		e.ordinary = map[string][]int{}
		if err := readRows(filepath.Join(dir, e.Expected), e.ordinary); err != nil {
			return fs, err
		}
		fs.encs = append(fs.encs, e)
	}
	return fs, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// readRows reads the expected-ids JSON lines into rows.
func readRows(path string, rows map[string][]int) error {
	return testkit.JSONLines(path, func(row struct {
		ID       string `json:"id"`
		Ordinary []int  `json:"ordinary"`
	}) error {
		rows[row.ID] = row.Ordinary
		return nil
	})
}

// BenchmarkVsTiktokenGo alternates package tokenizer and
// github.com/pkoukk/tiktoken-go (same ranks, same pattern string, ordinary
// mode) on the fixture corpus in every iteration, so both see the same
// machine load, and reports both throughputs and their ratio. tiktoken-go's
// regexp2 has no class intersection (&&), so for kimi-o200k it runs a
// different split and its ids differ from the oracle (logged).
func BenchmarkVsTiktokenGo(b *testing.B) {
	fs := load(b)
	for _, set := range []string{"all", "nolong"} {
		texts, size := testkit.CorpusTexts(fs.cases, set == "nolong")
		for _, e := range fs.encs {
			b.Run(set+"/"+e.name, func(b *testing.B) {
				tk := tiktokenGo(b, fs, e)
				var ours, theirs time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					for _, t := range texts {
						if _, err := e.enc.EncodeOrdinary(t); err != nil {
							b.Fatal(err)
						}
					}
					t1 := time.Now()
					for _, t := range texts {
						tk.EncodeOrdinary(t)
					}
					ours += t1.Sub(t0)
					theirs += time.Since(t1)
				}
				b.StopTimer()
				mb := float64(size) * float64(b.N) / 1e6
				b.ReportMetric(mb/ours.Seconds(), "k3-MB/s")
				b.ReportMetric(mb/theirs.Seconds(), "tiktoken-go-MB/s")
				b.ReportMetric(theirs.Seconds()/ours.Seconds(), "x-tiktoken-go")
			})
		}
	}
}

// tiktokenGo builds tiktoken-go's CoreBPE from the same ranks (no network:
// the encoder map is passed directly) and logs how many non-long cases its
// ids differ from the oracle's in.
func tiktokenGo(b *testing.B, fs *fixtureSet, e *encoding) *tiktoken.Tiktoken {
	r := e.enc.Ranks()
	enc := make(map[string]int, r.Len())
	for i := 0; i < r.Len(); i++ {
		t, _ := r.Token(i)
		enc[string(t)] = i
	}
	bpe, err := tiktoken.NewCoreBPE(enc, e.Specials, e.Pattern)
	if err != nil {
		b.Skipf("tiktoken-go cannot compile the %s pattern: %v", e.name, err)
	}
	sp := map[string]any{}
	for k := range e.Specials {
		sp[k] = true
	}
	tk := tiktoken.NewTiktoken(bpe, nil, sp)
	bad := 0
	for _, c := range fs.cases {
		if c.Category == "long" {
			continue // quadratic there; checked ids would take minutes
		}
		if !slices.Equal(tk.EncodeOrdinary(c.Text), e.ordinary[c.ID]) {
			bad++
		}
	}
	b.Logf("tiktoken-go %s: %d non-long cases differ from the oracle ids", e.name, bad)
	return tk
}

// TestOracleRows: the fixture rows this module benchmarks against are the
// ones package tokenizer reproduces (so a benchmark's mismatch count is
// tiktoken-go's).
func TestOracleRows(t *testing.T) {
	fs := load(t)
	for _, e := range fs.encs {
		for _, c := range fs.cases {
			if c.Category == "long" {
				continue
			}
			want, ok := e.ordinary[c.ID]
			if !ok {
				t.Fatalf("%s: no expected row for %s", e.name, c.ID)
			}
			got, err := e.enc.EncodeOrdinary(c.Text)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s %s: ids differ from the oracle (%v)", e.name, c.ID, err)
			}
		}
	}
}
