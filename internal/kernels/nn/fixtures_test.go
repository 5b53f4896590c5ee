package nn

import (
	"math"
	"testing"

	"github.com/k3-project/k3/internal/testkit/opfix"
)

func TestRMSNormFixture(t *testing.T) {
	f := opfix.Load(t, "rmsnorm")
	eps := float32(f.Scalar("eps"))
	w := f.F32("weight", 128)
	in := f.F32("in", 3, 128)
	got := make([]float32, len(in))
	RMSNormRows(got, in, w, eps)
	opfix.Compare(t, f.Tol, "rmsnorm out", got, f.F32("out", 3, 128))
}

func TestSiTUGLUFixture(t *testing.T) {
	f := opfix.Load(t, "situ_glu")
	b1, b2 := float32(f.Scalar("beta")), float32(f.Scalar("linear_beta"))
	in := f.F32("in", 6, 16)
	want := f.F32("out", 6, 8)
	got := make([]float32, len(want))
	for r := range 6 {
		row := in[r*16 : r*16+16]
		SiTUGLU(got[r*8:r*8+8], row[:8], row[8:], b1, b2)
	}
	opfix.Compare(t, f.Tol, "situ_glu out", got, want)
	maxAbs := float32(f.Scalar("max_abs"))
	for i, v := range got {
		if !(math.Abs(float64(v)) <= float64(maxAbs)) {
			t.Errorf("out[%d] = %v exceeds β1·β2 = %v", i, v, maxAbs)
		}
	}
}

func TestShortConvFixture(t *testing.T) {
	f := opfix.Load(t, "shortconv")
	c, k := f.Int("channels"), f.Int("kernel")
	conv, err := NewShortConv(c, k, f.F32("weight", c, 1, k))
	if err != nil {
		t.Fatal(err)
	}
	in := f.F32("in", 1, 5, c)
	tail := make([]float32, conv.TailLen())
	got := make([]float32, len(in))
	if err := conv.Forward(got, in, tail, 5); err != nil {
		t.Fatal(err)
	}
	opfix.Compare(t, f.Tol, "shortconv out", got, f.F32("out", 1, 5, c))
	// The tail holds raw inputs, so it must match bit for bit after rounding.
	opfix.Compare(t, f.Tol, "shortconv state_after", tail, f.F32("state_after", 1, c, k-1))
	next := make([]float32, c)
	if err := conv.Forward(next, f.F32("in_next", 1, 1, c), tail, 1); err != nil {
		t.Fatal(err)
	}
	opfix.Compare(t, f.Tol, "shortconv out_next", next, f.F32("out_next", 1, 1, c))
}

func TestAttnResFixture(t *testing.T) {
	f := opfix.Load(t, "attnres")
	const E = 128
	ns := f.Int("n_sources")
	nb := ns - 1
	a, err := NewAttnRes(f.F32("norm_weight", E), f.F32("proj_weight", E), float32(f.Scalar("eps")))
	if err != nil {
		t.Fatal(err)
	}
	opfix.Compare(t, f.Tol, "attnres fold", a.Fold(), f.F32("fold_hint", E))
	prefix := f.F32("prefix_sum", 4, E)
	blocks := f.F32("block_residual", 4, nb, E)
	got := make([]float32, 4*E)
	for p := range 4 {
		var src [][]float32
		for b := range nb {
			src = append(src, blocks[(p*nb+b)*E:(p*nb+b+1)*E])
		}
		src = append(src, prefix[p*E:(p+1)*E])
		if err := a.Apply(got[p*E:(p+1)*E], src); err != nil {
			t.Fatal(err)
		}
	}
	opfix.Compare(t, f.Tol, "attnres out", got, f.F32("out", 4, E))
}
