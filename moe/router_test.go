package moe

import (
	"errors"
	"math"
	"testing"

	"github.com/k3-project/k3/internal/testkit/opfix"
)

// pickRow runs the selection on given scores and biases (no gate matrix).
func pickRow(t *testing.T, k int, renorm bool, scale float32, score, bias []float32) ([]int, []float32, error) {
	t.Helper()
	r := &Router{bias: bias, k: k, renorm: renorm, scale: scale}
	choice := make([]float32, len(score))
	for i := range score {
		choice[i] = score[i] + bias[i]
	}
	ids, w := make([]int, k), make([]float32, k)
	err := r.pick(ids, w, score, choice)
	return ids, w, err
}

func TestRouterFixture(t *testing.T) {
	f := opfix.Load(t, "router")
	k, ne := f.Int("top_k"), f.Int("n_experts")
	const E, rows = 128, 6
	r, err := NewRouter(f.Matrix("gate_weight", ne, E), f.F32("bias", ne), k, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, rows*k)
	w := make([]float32, rows*k)
	if err := r.Route(ids, w, f.F32("in", rows, E), rows, 1); err != nil {
		t.Fatal(err)
	}
	wantIDs := f.F32("topk_idx", rows, k)
	wantW := f.F32("topk_weight", rows, k)
	// Sets first, then the weight of each expert id (§5.7).
	got, want := make([]float32, 0, rows*k), make([]float32, 0, rows*k)
	for row := range rows {
		for j := range k {
			id := int(wantIDs[row*k+j])
			found := -1
			for jj := range k {
				if ids[row*k+jj] == id {
					found = jj
				}
			}
			if found < 0 {
				t.Fatalf("row %d: picked %v, oracle %v", row, ids[row*k:(row+1)*k], wantIDs[row*k:(row+1)*k])
			}
			got = append(got, w[row*k+found])
			want = append(want, wantW[row*k+j])
		}
		// Pick order is descending biased score (the oracle's order matches).
		for j := range k {
			if ids[row*k+j] != int(wantIDs[row*k+j]) {
				t.Errorf("row %d: pick order %v, oracle %v", row, ids[row*k:(row+1)*k], wantIDs[row*k:(row+1)*k])
				break
			}
		}
	}
	opfix.Compare(t, f.Tol, "router weights", got, want)
}

func TestRouterSelectionRules(t *testing.T) {
	nan := float32(math.NaN())
	zero := make([]float32, 5)
	// Ties go to the lowest index; pick order is by biased score.
	ids, _, err := pickRow(t, 3, false, 1, []float32{0.5, 0.7, 0.7, 0.1, 0.7}, zero)
	if err != nil || ids[0] != 1 || ids[1] != 2 || ids[2] != 4 {
		t.Errorf("ties: ids %v err %v, want [1 2 4]", ids, err)
	}
	// NaN is never picked.
	ids, _, err = pickRow(t, 2, false, 1, []float32{nan, 0.2, nan, 0.1, nan}, zero)
	if err != nil || ids[0] != 1 || ids[1] != 3 {
		t.Errorf("NaN: ids %v err %v, want [1 3]", ids, err)
	}
	// Fewer than k selectable entries is an error, never a silent zero weight.
	_, _, err = pickRow(t, 3, false, 1, []float32{nan, 0.2, nan, 0.1, nan}, zero)
	if !errors.Is(err, ErrTooFewSelectable) {
		t.Errorf("too few selectable: err %v", err)
	}
	// The bias steers selection only; weights come from the unbiased scores.
	ids, w, err := pickRow(t, 1, false, 1, []float32{0.9, 0.1, 0.5, 0.5, 0.5}, []float32{0, 1, 0, 0, 0})
	if err != nil || ids[0] != 1 || w[0] != 0.1 {
		t.Errorf("bias: ids %v w %v err %v, want [1] [0.1]", ids, w, err)
	}
	// Renormalisation applies for k = 1 too: w = s ⊘ (s ⊕ 1e−20), then ⊗ scale.
	_, w, _ = pickRow(t, 1, true, 2.5, []float32{0.3, 0.1, 0, 0, 0}, zero)
	if want := (float32(0.3) / (float32(0.3) + float32(1e-20))) * 2.5; w[0] != want {
		t.Errorf("k=1 renorm: w %v, want %v", w[0], want)
	}
	// Renormalised weights: den = f32(RS sum) ⊕ f32(1e−20).
	_, w, _ = pickRow(t, 2, true, 1, []float32{0.3, 0.6, 0, 0, 0}, zero)
	den := float32(float64(float32(0.6))+float64(float32(0.3))) + float32(1e-20)
	if w[0] != float32(0.6)/den || w[1] != float32(0.3)/den {
		t.Errorf("renorm: w %v", w)
	}
}

func TestNewRouterErrors(t *testing.T) {
	g := opfix.Matrix(t, make([]float32, 4*8), 4, 8)
	if _, err := NewRouter(g, nil, 5, true, 1); err == nil {
		t.Error("k > NE accepted")
	}
	if _, err := NewRouter(g, make([]float32, 3), 2, true, 1); err == nil {
		t.Error("short bias accepted")
	}
	if _, err := NewRouter(nil, nil, 1, true, 1); err == nil {
		t.Error("nil gate accepted")
	}
}
