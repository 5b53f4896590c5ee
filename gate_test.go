package k3_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/floats"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sample"
)

// truth is a model fixture's reference_f64.json: the teacher-forced logits computed entirely in
// float64, and the float32 reference's own distance from them (SPEC §5.7).
type truth struct {
	T         int         `json:"T"`
	V         int         `json:"V"`
	Ref32Max  float64     `json:"ref32_max_abs_err"`
	Ref32RMS  float64     `json:"ref32_rms_err"`
	LogitsF64 [][]float64 `json:"logits_f64"`
}

func loadTruth(t testing.TB, dir string) *truth {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference_f64.json"))
	require.NoError(t, err)
	var r truth
	require.NoError(t, json.Unmarshal(b, &r), dir)
	require.Len(t, r.LogitsF64, r.T, "%s: logits_f64 rows", dir)
	require.Positive(t, r.Ref32Max, "%s: ref32_max_abs_err", dir)
	require.Positive(t, r.Ref32RMS, "%s: ref32_rms_err", dir)
	return &r
}

// distance returns max |a − b| and RMS(a − b) over all rows (float32 engine logits against the
// float64 truth).
func distance(got [][]float32, want [][]float64) (maxAbs, rms float64) {
	var n int
	var sum float64
	row := []float64(nil)
	for p, g := range got {
		row = row[:0]
		for _, v := range g {
			row = append(row, float64(v))
		}
		floats.Sub(row, want[p])
		if d := floats.Norm(row, math.Inf(1)); !(d <= maxAbs) { // also catches NaN
			maxAbs = d
		}
		sum += floats.Dot(row, row)
		n += len(row)
	}
	return maxAbs, math.Sqrt(sum / float64(n))
}

// TestGateTeacherForcing is GATE 1 (SPEC §5.7, E2): one forward over full_ids; the argmax at every
// position equals tf_pred, and the logits are at least twice as close to the float64 truth as the
// float32 reference is (max and RMS distance each ≤ half the reference's). The distance from the
// float32 reference's own logits is reported as information.
func TestGateTeacherForcing(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		m := openModel(t, dir)
		require.Equal(t, ref.Vocab, m.Config().Vocab, "vocab")
		logits, err := m.Forward(context.Background(), ref.FullIDs)
		require.NoError(t, err)
		var maxDiff float64
		agree := 0
		for p, row := range logits {
			got, err := sample.Argmax(row)
			require.NoError(t, err, "position %d", p)
			if assert.Equal(t, ref.TFPred[p], got, "position %d: argmax, oracle", p) {
				agree++
			}
			for v, bits := range ref.LogitsBits[p] {
				d := math.Abs(float64(row[v]) - float64(math.Float32frombits(bits)))
				if !(d <= maxDiff) { // also catches NaN
					maxDiff = d
				}
			}
		}
		tr := loadTruth(t, dir)
		require.Equal(t, len(logits), tr.T, "reference_f64 positions")
		require.Equal(t, ref.Vocab, tr.V, "reference_f64 vocab")
		maxAbs, rms := distance(logits, tr.LogitsF64)
		t.Logf("GATE1 %s: argmax %d/%d; vs float64 truth: max %.3g (%.2f of the f32 reference's %.3g), RMS %.3g (%.2f of %.3g); max |Δ| vs logits_bits %.3g; digest %016x",
			filepath.Base(dir), agree, len(logits), maxAbs, maxAbs/tr.Ref32Max, tr.Ref32Max,
			rms, rms/tr.Ref32RMS, tr.Ref32RMS, maxDiff, testkit.Digest(logits...))
		// Written as "≤ holds" so that NaN fails.
		assert.True(t, maxAbs <= 0.5*tr.Ref32Max, "max |engine − truth| = %g > 0.5 × %g", maxAbs, tr.Ref32Max)
		assert.True(t, rms <= 0.5*tr.Ref32RMS, "RMS(engine − truth) = %g > 0.5 × %g", rms, tr.Ref32RMS)
	})
}

// greedy runs Model.Generate and returns the ids and the logits each pick was made from.
func greedy(t testing.TB, m *k3.Model, prompt []int, n int, full bool) ([]int, [][]float32) {
	t.Helper()
	var steps [][]float32
	var ids []int
	o := k3.GenerateOptions{MaxTokens: n, FullRecompute: full,
		OnLogits: func(step int, l []float32) {
			assert.Equal(t, len(steps), step, "OnLogits step")
			steps = append(steps, append([]float32(nil), l...))
		}}
	for id, err := range m.Generate(context.Background(), prompt, o) {
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids, steps
}

// TestGateGreedy is GATE 2 (full recompute reproduces full_ids) and GATE 3 (incremental
// reproduces full_ids with logits bit-identical to GATE 2's).
func TestGateGreedy(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		m := openModel(t, dir)
		n := len(ref.FullIDs) - len(ref.PromptIDs)
		want := ref.FullIDs[len(ref.PromptIDs):]
		fullIDs, fullLogits := greedy(t, m, ref.PromptIDs, n, true)
		incIDs, incLogits := greedy(t, m, ref.PromptIDs, n, false)
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(fullIDs), "GATE2 full recompute")
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(incIDs), "GATE3 incremental")
		require.Len(t, incLogits, len(fullLogits), "logit steps")
		for i := range fullLogits {
			assert.True(t, testkit.SameBits(fullLogits[i], incLogits[i]), "GATE3 step %d: incremental logits differ from full recompute", i)
		}
		t.Logf("GATE2/3 %s: %d/%d tokens (full recompute), %d/%d (incremental), logits bit-identical; digest %016x",
			filepath.Base(dir), countEq(fullIDs, want), n, countEq(incIDs, want), n, testkit.Digest(incLogits...))
	})
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
