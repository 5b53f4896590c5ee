package k3_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sample"
	"github.com/k3-project/k3/tokenizer"
)

// TestGenerationUnderBudgets: speculative decoding, seeded sampling and saved sessions give the
// same tokens and logits under a streamed trunk and a zero expert cache as with mapped weights.
func TestGenerationUnderBudgets(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
		mapped := openModel(t, dir)
		budget := openModel(t, dir, k3.WithTrunkBudget(fl.Floor+fl.MinSlot), k3.WithTrunkSlot(smallSlot), k3.WithCacheBudget(0))
		n := len(ref.FullIDs) - len(ref.PromptIDs)
		gen := func(m *k3.Model, o k3.GenerateOptions) ([]int, uint64) {
			var steps [][]float32
			o.MaxTokens = n
			o.OnLogits = func(_ int, l []float32) { steps = append(steps, append([]float32(nil), l...)) }
			var ids []int
			for id, err := range m.Generate(context.Background(), ref.PromptIDs, o) {
				require.NoError(t, err)
				ids = append(ids, id)
			}
			return ids, testkit.Digest(steps...)
		}
		for _, k := range []int{0, 3} {
			s, err := sample.New(sample.Options{Temperature: 0.8, TopP: 0.9, Seed: 7})
			require.NoError(t, err)
			s2, err := sample.New(sample.Options{Temperature: 0.8, TopP: 0.9, Seed: 7})
			require.NoError(t, err)
			for _, c := range []struct {
				name   string
				o1, o2 k3.GenerateOptions
			}{
				{"greedy", k3.GenerateOptions{Speculative: k}, k3.GenerateOptions{Speculative: k}},
				{"sampled", k3.GenerateOptions{Speculative: k, Sampler: s}, k3.GenerateOptions{Speculative: k, Sampler: s2}},
			} {
				t.Run(fmt.Sprintf("%s/spec%d", c.name, k), func(t *testing.T) {
					a, da := gen(mapped, c.o1)
					b, db := gen(budget, c.o2)
					assert.Equal(t, a, b)
					assert.Equal(t, da, db)
					if c.name == "greedy" {
						assert.Equal(t, ref.FullIDs[len(ref.PromptIDs):], b)
					}
				})
			}
		}
		// A session saved under budgets continues like one saved from mapped weights.
		half := len(ref.FullIDs) / 2
		var saved [2]bytes.Buffer
		for i, m := range []*k3.Model{mapped, budget} {
			s := m.NewSession()
			require.NoError(t, s.Prefill(context.Background(), ref.FullIDs[:half]))
			require.NoError(t, s.Save(&saved[i], nil))
		}
		assert.Equal(t, saved[0].Bytes(), saved[1].Bytes(), "the state does not depend on where weights live")
		s, _, err := k3.LoadSession(budget, bytes.NewReader(saved[0].Bytes()))
		require.NoError(t, err)
		rows, err := s.PrefillAll(context.Background(), ref.FullIDs[half:])
		require.NoError(t, err)
		all, err := mapped.Forward(context.Background(), ref.FullIDs)
		require.NoError(t, err)
		assert.Equal(t, testkit.Digest(all[half:]...), testkit.Digest(rows...))
	})
}

// fakeTokens decodes id i to a fixed, distinct 3-byte string, so stop strings can be placed
// across token boundaries at will.
type fakeTokens struct{}

func (fakeTokens) TokenBytes(id int) ([]byte, error) {
	if id < 0 || id >= 4096 {
		return nil, fmt.Errorf("unknown id %d", id)
	}
	return []byte{byte('a' + id%26), byte('A' + id/26%26), byte('0' + id/676)}, nil
}

func decodeFake(ids []int) []byte {
	var b []byte
	for _, id := range ids {
		t, _ := fakeTokens{}.TokenBytes(id)
		b = append(b, t...)
	}
	return b
}

type genOutcome struct {
	ids    []int
	text   []byte // concatenated OnText chunks
	result k3.GenerateResult
}

func runGen(t *testing.T, m *k3.Model, prompt []int, o k3.GenerateOptions) genOutcome {
	t.Helper()
	var out genOutcome
	if o.Tokens != nil {
		o.OnText = func(b []byte) { out.text = append(out.text, b...) }
	}
	o.OnDone = func(r k3.GenerateResult) { out.result = r }
	for id, err := range m.Generate(context.Background(), prompt, o) {
		require.NoError(t, err)
		out.ids = append(out.ids, id)
	}
	return out
}

// TestStopStrings places stop strings across 1, 2 and 3 tokens of the greedy output of
// models/tiny: generation ends with the token completing the first occurrence, and the text is
// exactly the decoded output before it.
func TestStopStrings(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	plain := runGen(t, m, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 16, Tokens: fakeTokens{}})
	require.Len(t, plain.ids, 16)
	full := decodeFake(plain.ids)
	require.Equal(t, full, plain.text)
	require.Equal(t, k3.StopMaxTokens, plain.result.Reason)

	cases := map[string]struct{ from, to int }{ // byte range of the stop string in full
		"inside one token":     {3*5 + 0, 3*5 + 2},
		"across two tokens":    {3*6 + 1, 3*7 + 2},
		"across three tokens":  {3*8 + 2, 3*10 + 1},
		"whole tokens 2":       {3 * 9, 3 * 11},
		"ends at a boundary":   {3*4 + 2, 3 * 6},
		"first generated byte": {0, 4},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			stop := string(full[c.from:c.to])
			at := bytes.Index(full, []byte(stop)) // the first occurrence wins
			end := at + len(stop)
			wantTokens := (end + 2) / 3 // the token holding the stop string's last byte
			got := runGen(t, m, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 16, Tokens: fakeTokens{},
				StopStrings: []string{"never-matches", stop}})
			assert.Equal(t, plain.ids[:wantTokens], got.ids)
			assert.Equal(t, string(full[:at]), string(got.text))
			assert.Equal(t, string(full[:at]), string(got.result.Text))
			assert.Equal(t, k3.StopString, got.result.Reason)
			assert.Equal(t, stop, got.result.StopText)
		})
	}

	t.Run("no partial stop string is released", func(t *testing.T) {
		// A stop string whose first 4 bytes occur but whose end never does: the text is released
		// in full only when generation ends.
		stop := string(full[3*2:3*2+4]) + "~"
		var chunks [][]byte
		o := k3.GenerateOptions{MaxTokens: 16, Tokens: fakeTokens{}, StopStrings: []string{stop},
			OnText: func(b []byte) { chunks = append(chunks, bytes.Clone(b)) }}
		for _, err := range m.Generate(context.Background(), ref.PromptIDs, o) {
			require.NoError(t, err)
		}
		var seen []byte
		for i, ch := range chunks {
			seen = append(seen, ch...)
			if i < len(chunks)-1 {
				assert.False(t, bytes.HasSuffix(seen, []byte(stop[:4])), "chunk %d released a possible stop prefix", i)
			}
		}
		assert.Equal(t, full, seen)
	})
}

// splitRunes decodes the n-th token it is asked for, whatever its id, to the n-th 3 bytes of a
// text of 2-, 3- and 4-byte characters, so that almost every token ends inside a character.
type splitRunes struct{ n int }

// splitText repeats 11 bytes: its character boundaries fall at 0, 2, 5, 9, 11, … 33 (11 tokens).
var splitText = []byte(strings.Repeat("é€😀ж", 8))

func (s *splitRunes) TokenBytes(int) ([]byte, error) {
	if 3*s.n+3 > len(splitText) {
		return nil, fmt.Errorf("token %d is past the text", s.n)
	}
	s.n++
	return splitText[3*s.n-3 : 3*s.n], nil
}

// TestOnTextWholeCharacters: tokens that end inside UTF-8 characters reach OnText as pieces of
// whole characters, which concatenate to the whole text, with and without a stop string held back.
func TestOnTextWholeCharacters(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	for _, stops := range [][]string{nil, {"never"}} {
		var chunks [][]byte
		var res k3.GenerateResult
		o := k3.GenerateOptions{MaxTokens: 11, Tokens: &splitRunes{}, StopStrings: stops,
			OnText: func(b []byte) { chunks = append(chunks, bytes.Clone(b)) },
			OnDone: func(r k3.GenerateResult) { res = r }}
		for _, err := range m.Generate(context.Background(), ref.PromptIDs, o) {
			require.NoError(t, err)
		}
		whole := splitText[:33]
		require.Greater(t, len(chunks), 5)
		for i, c := range chunks {
			assert.True(t, utf8.Valid(c), "stops %q: piece %d (% x) is not whole characters", stops, i, c)
		}
		assert.Equal(t, whole, bytes.Join(chunks, nil))
		assert.Equal(t, string(whole), string(res.Text))
	}
}

func TestStopReasons(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	plain := runGen(t, m, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 8})

	got := runGen(t, m, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 8, Stop: []int{plain.ids[3]}})
	assert.Equal(t, k3.StopID, got.result.Reason)
	assert.Equal(t, plain.ids[:4], got.ids)

	// MaxContext counts positions: the prompt plus every yielded token but the last.
	mc := len(ref.PromptIDs) + 5
	got = runGen(t, m, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 8, MaxContext: mc})
	assert.Equal(t, k3.StopContext, got.result.Reason)
	assert.Equal(t, plain.ids[:6], got.ids)
	got = runGen(t, m, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 8, MaxContext: mc, FullRecompute: true})
	assert.Equal(t, k3.StopContext, got.result.Reason)
	assert.Equal(t, plain.ids[:6], got.ids)

	var res k3.GenerateResult
	for _, err := range m.Generate(context.Background(), ref.PromptIDs, k3.GenerateOptions{MaxTokens: 4, MaxContext: 3,
		OnDone: func(r k3.GenerateResult) { res = r }}) {
		assert.ErrorIs(t, err, k3.ErrContextFull)
	}
	assert.Equal(t, k3.StopError, res.Reason)

	n := 0
	for range m.Generate(context.Background(), ref.PromptIDs, k3.GenerateOptions{MaxTokens: 8,
		OnDone: func(r k3.GenerateResult) { res = r }}) {
		if n++; n == 2 {
			break
		}
	}
	assert.Equal(t, k3.StopConsumer, res.Reason)
	assert.Equal(t, 2, res.Tokens)

	for name, o := range map[string]k3.GenerateOptions{
		"stop strings without Tokens": {MaxTokens: 2, StopStrings: []string{"x"}},
		"empty stop string":           {MaxTokens: 2, StopStrings: []string{""}, Tokens: fakeTokens{}},
		"negative context":            {MaxTokens: 2, MaxContext: -1},
		"speculative full recompute":  {MaxTokens: 2, Speculative: 2, FullRecompute: true},
		"speculative too long":        {MaxTokens: 2, Speculative: k3.MaxSpeculative + 1},
	} {
		for _, err := range m.Generate(context.Background(), ref.PromptIDs, o) {
			assert.Error(t, err, name)
		}
	}
	assert.Equal(t, "stop_string", k3.StopString.String())
	assert.Equal(t, "length", k3.StopMaxTokens.String())
}

// TestDefaultStop: the tokenizer's [EOS] then <|end_of_msg|>, then the
// config's eos ids, each once; ids outside the vocabulary are dropped.
func TestDefaultStop(t *testing.T) {
	tokens := make([][]byte, 256)
	for i := range tokens {
		tokens[i] = []byte{byte(i)}
	}
	ranks, err := tokenizer.NewRanks(tokens)
	require.NoError(t, err)
	enc, err := tokenizer.New(tokenizer.Spec{Ranks: ranks, Split: tokenizer.SplitCL100K,
		Specials: map[string]int{"[BOS]": 300, "[EOS]": 302, "<|end_of_msg|>": 301}})
	require.NoError(t, err)

	c := &config.Config{Vocab: 400, EOSTokenIDs: []int{301, 7, 7}}
	stop, dropped := k3.DefaultStop(enc, c)
	assert.Equal(t, []int{302, 301, 7}, stop)
	assert.Empty(t, dropped)

	c.Vocab = 302
	stop, dropped = k3.DefaultStop(enc, c)
	assert.Equal(t, []int{301, 7}, stop)
	assert.Equal(t, []int{302}, dropped)

	stop, dropped = k3.DefaultStop(nil, c)
	assert.Equal(t, []int{301, 7}, stop, "without a tokenizer, the config's eos alone")
	assert.Empty(t, dropped)

	stop, _ = k3.DefaultStop(nil, &config.Config{Vocab: 10})
	assert.Empty(t, stop)
}

// refRNG is xoshiro256** seeded by SplitMix64, written here from the published description
// independently of the library's code.
type refRNG struct{ s0, s1, s2, s3 uint64 }

func newRefRNG(seed uint64) *refRNG {
	sm := seed
	split := func() uint64 {
		sm += 0x9E3779B97F4A7C15
		z := sm
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		return z ^ z>>31
	}
	return &refRNG{split(), split(), split(), split()}
}

func (r *refRNG) uniform() float64 {
	out := bits.RotateLeft64(r.s1*5, 7) * 9
	t := r.s1 << 17
	r.s2 ^= r.s0
	r.s3 ^= r.s1
	r.s1 ^= r.s2
	r.s0 ^= r.s3
	r.s2 ^= t
	r.s3 = bits.RotateLeft64(r.s3, 45)
	return float64(out>>11) / (1 << 53)
}

// refSample is a plain transcription of the documented sampler stages (SamplerOptions).
func refSample(logits []float32, hist []int, o sample.Options, r *refRNG) int {
	l := make([]float64, len(logits))
	for i, v := range logits {
		l[i] = float64(v)
	}
	win := hist
	if o.PenaltyWindow > 0 && len(win) > o.PenaltyWindow {
		win = win[len(win)-o.PenaltyWindow:]
	}
	count := map[int]int{}
	for _, id := range win {
		count[id]++
	}
	for id, c := range count {
		if o.RepeatPenalty > 1 {
			if l[id] > 0 {
				l[id] /= o.RepeatPenalty
			} else {
				l[id] *= o.RepeatPenalty
			}
		}
		l[id] -= float64(c) * o.FrequencyPenalty
		l[id] -= o.PresencePenalty
	}
	if o.Temperature == 0 {
		best := 0
		for i := range l {
			if l[i] > l[best] {
				best = i
			}
		}
		return best
	}
	ids := make([]int, len(l))
	for i := range ids {
		ids[i] = i
	}
	z := func(i int) float64 { return l[i] / o.Temperature }
	sort.SliceStable(ids, func(a, b int) bool { return z(ids[a]) > z(ids[b]) })
	if o.TopK > 0 && o.TopK < len(ids) {
		ids = ids[:o.TopK]
	}
	e := make([]float64, len(ids))
	total := 0.0
	for j, id := range ids {
		e[j] = math.Exp(z(id) - z(ids[0]))
		total += e[j]
	}
	keep := len(ids)
	if o.TopP > 0 && o.TopP < 1 {
		run := 0.0
		for j := range ids {
			run += e[j]
			if run/total >= o.TopP {
				keep = j + 1
				break
			}
		}
	}
	if o.MinP > 0 {
		for j := 1; j < keep; j++ {
			if e[j] < o.MinP*e[0] {
				keep = j
				break
			}
		}
	}
	kept := 0.0
	for j := range keep {
		kept += e[j]
	}
	target, run := r.uniform()*kept, 0.0
	for j := range keep {
		run += e[j]
		if target < run {
			return ids[j]
		}
	}
	return ids[keep-1]
}

var samplerCases = map[string]sample.Options{
	"temperature":   {Temperature: 1, Seed: 7},
	"top-k":         {Temperature: 0.8, TopK: 20, Seed: 42},
	"top-p":         {Temperature: 1.2, TopP: 0.7, Seed: 3},
	"min-p":         {Temperature: 2, MinP: 0.3, Seed: 11},
	"penalties":     {Temperature: 0.9, RepeatPenalty: 1.5, FrequencyPenalty: 0.1, PresencePenalty: 0.05, PenaltyWindow: 8, Seed: 5},
	"greedy+repeat": {RepeatPenalty: 2, PenaltyWindow: 6},
}

func generateIDs(t *testing.T, m *k3.Model, prompt []int, n int, o k3.GenerateOptions) []int {
	t.Helper()
	o.MaxTokens = n
	var out []int
	for id, err := range m.Generate(context.Background(), prompt, o) {
		require.NoError(t, err)
		out = append(out, id)
	}
	return out
}

// TestSamplerMatchesReference: on models/tiny, every sampler configuration yields the id
// sequence the independent reference computes from the same logits, for 1 and 2 threads.
func TestSamplerMatchesReference(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	const n = 24
	for name, o := range samplerCases {
		t.Run(name, func(t *testing.T) {
			var got [2][]int
			for th := 1; th <= 2; th++ {
				m := openModel(t, dir, k3.WithThreads(th))
				sm, err := sample.New(o)
				require.NoError(t, err)
				got[th-1] = generateIDs(t, m, ref.PromptIDs, n, k3.GenerateOptions{Sampler: sm})
			}
			assert.Equal(t, got[0], got[1], "threads 1 vs 2")

			m := openModel(t, dir, k3.WithThreads(1))
			s := m.NewSession()
			ctx := context.Background()
			require.NoError(t, s.Prefill(ctx, ref.PromptIDs))
			r := newRefRNG(o.Seed)
			var want []int
			for range n {
				id := refSample(s.Logits(), s.IDs(), o, r)
				want = append(want, id)
				require.NoError(t, s.Step(ctx, id))
			}
			assert.Equal(t, want, got[0])
			if o.Temperature > 0 {
				greedy := generateIDs(t, m, ref.PromptIDs, n, k3.GenerateOptions{})
				assert.NotEqual(t, greedy, got[0], "sampling should leave the greedy path")
			}
		})
	}
}

// TestSamplerSeeds: different seeds give different streams; the same seed the same stream;
// full recompute and incremental modes agree.
func TestSamplerSeeds(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	run := func(seed uint64, full bool) []int {
		sm, err := sample.New(sample.Options{Temperature: 1, Seed: seed})
		require.NoError(t, err)
		return generateIDs(t, m, ref.PromptIDs, 16, k3.GenerateOptions{Sampler: sm, FullRecompute: full})
	}
	a := run(1, false)
	assert.Equal(t, a, run(1, false))
	assert.Equal(t, a, run(1, true))
	assert.NotEqual(t, a, run(2, false))
}

// specRun generates with o and records the ids, the bits of the logits each pick was made
// from, and the result.
func specRun(t testing.TB, m *k3.Model, prompt []int, o k3.GenerateOptions) ([]int, [][]uint32, k3.GenerateResult) {
	t.Helper()
	var ids []int
	var rows [][]uint32
	var res k3.GenerateResult
	o.OnLogits = func(step int, l []float32) {
		require.Equal(t, len(rows), step, "OnLogits steps in order")
		rows = append(rows, f32bits(l))
	}
	o.OnDone = func(r k3.GenerateResult) { res = r }
	for id, err := range m.Generate(context.Background(), prompt, o) {
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids, rows, res
}

// repetitive makes a prompt in which prompt lookup finds drafts: the reference prompt three
// times.
func repetitive(p []int) []int {
	return append(append(append([]int(nil), p...), p...), p...)
}

// lookupPrompt returns a prompt in which id a is followed once by every id of the vocabulary
// and ends with a, so whatever the first pick t0 is, the pair (a, t0) occurred before and
// prompt lookup drafts at the first step.
func lookupPrompt(m *k3.Model, a int) []int {
	v := m.Config().Vocab
	var p []int
	for y := range v {
		p = append(p, a, y, (y*7+3)%v)
	}
	return append(p, a)
}

// TestSpeculativeGreedyEqualsPlain: for k = 1..8 on every fixture model, speculative greedy
// decoding with prompt lookup yields the plain greedy ids, each picked from bit-identical
// logits, on a repetitive and a non-repetitive prompt and on one where the lookup drafts.
// (TestSpeculativeOracleDrafts forces accepted and rejected drafts of every shape.)
func TestSpeculativeGreedyEqualsPlain(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		m := openModel(t, dir)
		for _, prompt := range [][]int{ref.PromptIDs, repetitive(ref.PromptIDs)} {
			const n = 24
			want, wantRows, _ := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: n})
			for k := 1; k <= 8; k++ {
				got, gotRows, res := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: n, Speculative: k})
				require.Equal(t, want, got, "k=%d", k)
				require.Equal(t, wantRows, gotRows, "k=%d: logits", k)
				assert.Equal(t, k3.StopMaxTokens, res.Reason)
			}
		}

		// The lookup prompt is long: prefill it once and restore it for every k.
		ctx := context.Background()
		s, snap := prefilled(t, m, lookupPrompt(m, ref.PromptIDs[0]))
		gen := func(k int) ([]int, [][]uint32, k3.GenerateResult) {
			require.NoError(t, s.Restore(snap))
			var ids []int
			var rows [][]uint32
			var res k3.GenerateResult
			o := k3.GenerateOptions{MaxTokens: 8, Speculative: k, OnDone: func(r k3.GenerateResult) { res = r },
				OnLogits: func(_ int, l []float32) { rows = append(rows, f32bits(l)) }}
			for id, err := range s.Generate(ctx, o) {
				require.NoError(t, err)
				ids = append(ids, id)
			}
			return ids, rows, res
		}
		want, wantRows, _ := gen(0)
		for _, k := range []int{1, 3, 8} {
			got, gotRows, res := gen(k)
			require.Equal(t, want, got, "lookup prompt, k=%d", k)
			require.Equal(t, wantRows, gotRows, "lookup prompt, k=%d: logits", k)
			assert.Positive(t, res.Verifies, "lookup prompt, k=%d: the lookup never drafted", k)
		}
	})
}

// TestSpeculativeSessionState: after speculative generation ends on a stop id, a stop string,
// MaxTokens or MaxContext, the session holds exactly what plain generation leaves (every
// yielded token but the last), bit for bit.
func TestSpeculativeSessionState(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	ctx := context.Background()
	prompt := repetitive(ref.PromptIDs)
	plain, _, _ := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: 20})
	full := decodeFake(plain)
	for name, o := range map[string]k3.GenerateOptions{
		"max tokens":  {MaxTokens: 17},
		"stop id":     {MaxTokens: 20, Stop: []int{plain[9]}},
		"stop string": {MaxTokens: 20, Tokens: fakeTokens{}, StopStrings: []string{string(full[3*11+1 : 3*12+2])}},
		"context":     {MaxTokens: 20, MaxContext: len(prompt) + 13},
	} {
		t.Run(name, func(t *testing.T) {
			run := func(k int) (*k3.Session, []int, k3.GenerateResult) {
				s := m.NewSession()
				require.NoError(t, s.Prefill(ctx, prompt))
				o := o
				o.Speculative = k
				var res k3.GenerateResult
				o.OnDone = func(r k3.GenerateResult) { res = r }
				var ids []int
				for id, err := range s.Generate(ctx, o) {
					require.NoError(t, err)
					ids = append(ids, id)
				}
				return s, ids, res
			}
			ps, pids, pres := run(0)
			for k := 1; k <= 8; k++ {
				ss, sids, sres := run(k)
				require.Equal(t, pids, sids, "k=%d", k)
				require.Equal(t, pres.Reason, sres.Reason, "k=%d", k)
				require.Equal(t, ps.IDs(), ss.IDs(), "k=%d: session ids", k)
				require.Equal(t, f32bits(ps.Logits()), f32bits(ss.Logits()), "k=%d: session logits", k)
				// The states match too: the next step gives the same logits.
				next := pids[len(pids)-1]
				require.NoError(t, ps.Step(ctx, next))
				require.NoError(t, ss.Step(ctx, next))
				require.Equal(t, f32bits(ps.Logits()), f32bits(ss.Logits()), "k=%d: after one more step", k)
				ps, _, _ = run(0)
			}
		})
	}
}

// TestSpeculativeSampling: with a sampler, speculative decoding is deterministic for a seed and
// k.
func TestSpeculativeSampling(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	prompt := repetitive(ref.PromptIDs)
	run := func(k int) ([]int, k3.GenerateResult) {
		sm, err := sample.New(sample.Options{Temperature: 0.3, Seed: 17})
		require.NoError(t, err)
		ids, _, res := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: 32, Sampler: sm, Speculative: k})
		return ids, res
	}
	a, res := run(4)
	b, _ := run(4)
	assert.Equal(t, a, b)
	assert.Len(t, a, 32)
	t.Logf("drafted %d accepted %d in %d verification passes", res.Drafted, res.Accepted, res.Verifies)
}

// perfPrompts: "repetitive" quotes a block of ids back (as code or a document quoted in a reply
// would); "plain" never repeats an id pair.
func perfPrompts() map[string][]int {
	block := []int{1, 100, 2000, 30000, 5, 77, 123, 4567, 8, 9, 10, 11, 12, 13, 14, 15, 901, 902, 903, 904}
	var rep []int
	for range 3 {
		rep = append(rep, block...)
	}
	plain := make([]int, 60)
	for i := range plain {
		plain[i] = (i*7919 + 13) % 32768
	}
	return map[string][]int{"repetitive": rep, "plain": plain}
}

// TestSpeculativePerf: speculative greedy equals plain greedy on perf for k = 1..8.
func TestSpeculativePerf(t *testing.T) {
	dir := perfDir(t)
	m := openModel(t, dir)
	for name, prompt := range perfPrompts() {
		want, _, _ := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: 12})
		for k := 1; k <= 8; k++ {
			got, _, res := specRun(t, m, prompt, k3.GenerateOptions{MaxTokens: 12, Speculative: k})
			require.Equal(t, want, got, "%s k=%d", name, k)
			t.Logf("%s k=%d: drafted %d accepted %d passes %d", name, k, res.Drafted, res.Accepted, res.Verifies)
		}
	}
}

// BenchmarkSpeculativePerf: greedy generation of 24 tokens on perf, plain (k=0) and with
// prompt-lookup drafts of k ids, on a repetitive and a non-repetitive prompt. Compare the
// s/op of k>0 with k=0 of the same prompt (benchstat).
func BenchmarkSpeculativePerf(b *testing.B) {
	dir := perfDir(b)
	m := openModel(b, dir)
	ctx := context.Background()
	for _, name := range []string{"repetitive", "plain"} {
		s, snap := prefilled(b, m, perfPrompts()[name])
		for _, k := range []int{0, 4} {
			b.Run(name+"/k="+strconv.Itoa(k), func(b *testing.B) {
				var res k3.GenerateResult
				for b.Loop() {
					if err := s.Restore(snap); err != nil {
						b.Fatal(err)
					}
					o := k3.GenerateOptions{MaxTokens: 24, Speculative: k, OnDone: func(r k3.GenerateResult) { res = r }}
					for _, err := range s.Generate(ctx, o) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/24, "s/token")
				if res.Drafted > 0 {
					b.ReportMetric(float64(res.Accepted)/float64(res.Drafted), "accept")
				}
			})
		}
	}
}

// BenchmarkSecondTurnPerf: the second turn of a conversation on perf — 8 new ids and 8
// generated tokens after a 96-id first turn — from a loaded state file versus recomputing the
// whole history (the "scratch" case prefills the first turn again).
func BenchmarkSecondTurnPerf(b *testing.B) {
	dir := perfDir(b)
	m := openModel(b, dir)
	ctx := context.Background()
	turn1 := make([]int, 96)
	for i := range turn1 {
		turn1[i] = (i*104729 + 7) % 32768
	}
	turn2 := []int{11, 22, 33, 44, 55, 66, 77, 88}
	s := m.NewSession()
	if err := s.Prefill(ctx, turn1); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "turn1.k3st")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Save(f, nil); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	second := func(b *testing.B, s *k3.Session) {
		if err := s.Prefill(ctx, turn2); err != nil {
			b.Fatal(err)
		}
		for _, err := range s.Generate(ctx, k3.GenerateOptions{MaxTokens: 8}) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("scratch", func(b *testing.B) {
		for b.Loop() {
			s := m.NewSession()
			if err := s.Prefill(ctx, turn1); err != nil {
				b.Fatal(err)
			}
			second(b, s)
		}
	})
	b.Run("loaded", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			s, _, err := k3.LoadSession(m, f)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			second(b, s)
		}
	})
}

// TestPerfVerifyPassCost logs what one forward pass over 1, 5 and 9 new positions costs with
// mapped weights and at the memory floor: the price of verifying speculative drafts (README,
// Generation). It needs K3_PERF_DIR like TestPerfFloorBitIdentical.
func TestPerfVerifyPassCost(t *testing.T) {
	dir := perfDir(t)
	p, err := k3.PlanFor(dir, k3.WithTrunkBudget(1<<50))
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		opts []k3.Option
	}{{"mapped", nil}, {"floor", []k3.Option{k3.WithTrunkBudget(p.Trunk.Floor), k3.WithCacheBudget(0)}}} {
		m := openModel(t, dir, c.opts...)
		for _, n := range []int{1, 5, 9} {
			var best time.Duration
			for range 2 {
				s := m.NewSession()
				require.NoError(t, s.Prefill(t.Context(), []int{11, 2048, 7, 31000, 5}))
				ids := make([]int, n)
				for i := range ids {
					ids[i] = 100 + i
				}
				t0 := time.Now()
				_, err := s.PrefillAll(t.Context(), ids)
				require.NoError(t, err)
				if d := time.Since(t0); best == 0 || d < best {
					best = d
				}
			}
			t.Logf("%s: one pass over %d positions: %.3f s", c.name, n, best.Seconds())
		}
		m.Close()
	}
}

// BenchmarkVerifyPassPerf: the cost of one batched pass over T new positions with every
// position's logits (a verification of T−1 drafts), against T = 1 (a plain decode step), after
// a 16-id prompt on perf. Speculation pays when accepted drafts per pass exceed
// cost(T)/cost(1) − 1.
func BenchmarkVerifyPassPerf(b *testing.B) {
	dir := perfDir(b)
	m := openModel(b, dir)
	ctx := context.Background()
	s, snap := prefilled(b, m, perfPrompts()["repetitive"][:16])
	for _, T := range []int{1, 2, 3, 5, 9} {
		ids := make([]int, T)
		for i := range ids {
			ids[i] = 1000 + 37*i
		}
		b.Run("T="+strconv.Itoa(T), func(b *testing.B) {
			for b.Loop() {
				if err := s.Restore(snap); err != nil {
					b.Fatal(err)
				}
				if _, err := s.PrefillAll(ctx, ids); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/pass")
		})
	}
}
