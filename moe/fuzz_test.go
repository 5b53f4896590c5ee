package moe

import (
	"errors"
	"math"
	"testing"
)

// FuzzRouterPick checks the selection invariants on arbitrary scores and
// biases (including NaN and ±Inf): picks are distinct, never NaN choices, in
// non-increasing biased-score order with ties to the lower index, and
// failure happens exactly when fewer than k entries are selectable.
func FuzzRouterPick(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 63, 0, 0, 192, 127, 0, 0, 128, 255}, uint8(2), true)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(3), false)
	f.Add([]byte{205, 204, 76, 62, 205, 204, 76, 62, 0, 0, 128, 127, 1, 0, 192, 127}, uint8(1), true)
	f.Fuzz(func(t *testing.T, raw []byte, k8 uint8, renorm bool) {
		n := len(raw) / 8
		if n == 0 || n > 64 {
			return
		}
		k := 1 + int(k8)%n
		score, bias, choice := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range n {
			score[i] = math.Float32frombits(le32(raw[8*i:]))
			bias[i] = math.Float32frombits(le32(raw[8*i+4:]))
			choice[i] = score[i] + bias[i]
		}
		orig := append([]float32(nil), choice...)
		selectable := 0
		for _, c := range orig {
			if c > float32(math.Inf(-1)) {
				selectable++
			}
		}
		r := &Router{bias: bias, k: k, renorm: renorm, scale: 1}
		ids, w := make([]int, k), make([]float32, k)
		err := r.pick(ids, w, score, choice)
		if selectable < k {
			if !errors.Is(err, ErrTooFewSelectable) {
				t.Fatalf("%d selectable for k=%d: err %v", selectable, k, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		seen := map[int]bool{}
		for j, id := range ids {
			if seen[id] || math.IsNaN(float64(orig[id])) {
				t.Fatalf("pick %d = %d repeated or NaN (ids %v)", j, id, ids)
			}
			seen[id] = true
			// Nothing unpicked beats the pick, or ties it at a lower index.
			for i, c := range orig {
				if seen[i] {
					continue
				}
				if c > orig[id] || (c == orig[id] && i < id) {
					t.Fatalf("pick %d = %d (%v) but %d (%v) was available", j, id, orig[id], i, c)
				}
			}
		}
		if !renorm {
			for j, id := range ids {
				if math.Float32bits(w[j]) != math.Float32bits(score[id]) {
					t.Fatalf("weight %d = %v, want the unbiased score %v", j, w[j], score[id])
				}
			}
		}
	})
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
