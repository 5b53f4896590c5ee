package k3_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/fixtures"
)

// reference is a model fixture's reference.json (SPEC §13.2).
type reference struct {
	PromptIDs  []int      `json:"prompt_ids"`
	FullIDs    []int      `json:"full_ids"`
	TFPred     []int      `json:"tf_pred"`
	Vocab      int        `json:"vocab"`
	LogitsBits [][]uint32 `json:"logits_bits"`
}

func loadReference(t testing.TB, dir string) *reference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if len(r.FullIDs) <= len(r.PromptIDs) || len(r.TFPred) != len(r.FullIDs) || len(r.LogitsBits) != len(r.FullIDs) {
		t.Fatalf("%s: inconsistent reference.json", dir)
	}
	return &r
}

func openModel(t testing.TB, dir string, opts ...k3.Option) *k3.Model {
	t.Helper()
	m, err := k3.Open(dir, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// digest is an FNV-1a hash of the logits' bit patterns (SPEC §5.4): equal digests mean
// bit-identical logits, so runs of different builds and schedules compare by a short line
// (TestPureGoBuildDigests).
func digest(rows [][]float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, r := range rows {
		for _, v := range r {
			u := math.Float32bits(v)
			b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestGateTeacherForcing is GATE 1 (SPEC §5.7, E2): one forward over full_ids; the argmax at every
// position equals tf_pred and every logit is within 1e-5 of the oracle's.
func TestGateTeacherForcing(t *testing.T) {
	for _, dir := range fixtures.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := loadReference(t, dir)
			m := openModel(t, dir)
			if m.Config().Vocab != ref.Vocab {
				t.Fatalf("vocab %d, reference %d", m.Config().Vocab, ref.Vocab)
			}
			logits, err := m.Forward(context.Background(), ref.FullIDs)
			if err != nil {
				t.Fatal(err)
			}
			var maxDiff float64
			agree := 0
			for p, row := range logits {
				got, err := k3.Argmax(row)
				if err != nil {
					t.Fatalf("position %d: %v", p, err)
				}
				if got == ref.TFPred[p] {
					agree++
				} else {
					t.Errorf("position %d: argmax %d, oracle %d", p, got, ref.TFPred[p])
				}
				for v, bits := range ref.LogitsBits[p] {
					d := math.Abs(float64(row[v]) - float64(math.Float32frombits(bits)))
					if !(d <= maxDiff) { // also catches NaN
						maxDiff = d
					}
				}
			}
			t.Logf("GATE1 %s: argmax %d/%d, max |Δlogit| = %.3g, digest %016x",
				filepath.Base(dir), agree, len(logits), maxDiff, digest(logits))
			if !(maxDiff <= 1e-5) {
				t.Errorf("max |Δlogit| = %g > 1e-5", maxDiff)
			}
		})
	}
}

// greedy runs Model.Generate and returns the ids and the logits each pick was made from.
func greedy(t testing.TB, m *k3.Model, prompt []int, n int, full bool) ([]int, [][]float32) {
	t.Helper()
	var steps [][]float32
	var ids []int
	o := k3.GenerateOptions{MaxTokens: n, FullRecompute: full,
		OnLogits: func(step int, l []float32) {
			if step != len(steps) {
				t.Errorf("OnLogits step %d, want %d", step, len(steps))
			}
			steps = append(steps, append([]float32(nil), l...))
		}}
	for id, err := range m.Generate(context.Background(), prompt, o) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids, steps
}

// TestGateGreedy is GATE 2 (full recompute reproduces full_ids) and GATE 3 (incremental
// reproduces full_ids with logits bit-identical to GATE 2's).
func TestGateGreedy(t *testing.T) {
	for _, dir := range fixtures.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := loadReference(t, dir)
			m := openModel(t, dir)
			n := len(ref.FullIDs) - len(ref.PromptIDs)
			want := ref.FullIDs[len(ref.PromptIDs):]
			fullIDs, fullLogits := greedy(t, m, ref.PromptIDs, n, true)
			incIDs, incLogits := greedy(t, m, ref.PromptIDs, n, false)
			if fmt.Sprint(fullIDs) != fmt.Sprint(want) {
				t.Errorf("GATE2 full recompute:\n got %v\nwant %v", fullIDs, want)
			}
			if fmt.Sprint(incIDs) != fmt.Sprint(want) {
				t.Errorf("GATE3 incremental:\n got %v\nwant %v", incIDs, want)
			}
			if len(fullLogits) != len(incLogits) {
				t.Fatalf("%d vs %d logit steps", len(fullLogits), len(incLogits))
			}
			for i := range fullLogits {
				if !sameBits(fullLogits[i], incLogits[i]) {
					t.Errorf("GATE3 step %d: incremental logits differ from full recompute", i)
				}
			}
			t.Logf("GATE2/3 %s: %d/%d tokens (full recompute), %d/%d (incremental), logits bit-identical; digest %016x",
				filepath.Base(dir), countEq(fullIDs, want), n, countEq(incIDs, want), n, digest(incLogits))
		})
	}
}

func countEq(a, b []int) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			n++
		}
	}
	return n
}
