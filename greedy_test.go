package k3_test

import (
	"errors"
	"math"
	"testing"

	"github.com/k3-project/k3"
)

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		in   []float32
		want int
		err  error
	}{
		{[]float32{1, 3, 3, 2}, 1, nil},         // first of a tie
		{[]float32{nan, 0.5, nan, 0.7}, 3, nil}, // NaN never picked
		{[]float32{-inf, -inf}, 0, nil},         // -Inf is a value
		{[]float32{nan, -inf}, 1, nil},
		{[]float32{2, inf, nan, inf}, 1, nil},
		{[]float32{nan, nan}, 0, k3.ErrAllNaN},
		{nil, 0, k3.ErrNoLogits},
		{[]float32{float32(math.Copysign(0, -1)), 0}, 0, nil}, // -0 == +0: the first wins
	}
	for _, c := range cases {
		got, err := k3.Argmax(c.in)
		if !errors.Is(err, c.err) || (err == nil && got != c.want) {
			t.Errorf("Argmax(%v) = %d, %v; want %d, %v", c.in, got, err, c.want, c.err)
		}
	}
}
