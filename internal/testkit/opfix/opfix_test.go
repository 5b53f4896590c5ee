package opfix

import (
	"testing"
)

// recorder keeps what Compare reports instead of failing the test.
type recorder struct {
	testing.TB
	errors int
}

func (r *recorder) Errorf(string, ...any) { r.errors++ }
func (r *recorder) Logf(string, ...any)   {}
func (r *recorder) Helper()               {}

func TestCompareTolerance(t *testing.T) {
	tol := Tolerance{Abs: 1e-5, Rel: 1e-4}
	for _, c := range []struct {
		got, want float32
		worst     float64 // |a−b| / (Abs + Rel·|b|)
		fails     bool
	}{
		{1, 1, 0, false},
		{1.00005, 1, 0.4545, false}, // 5e-5 of a 1.1e-4 bound
		{100.02, 100, 2, true},      // 2e-2 of a 1.001e-2 bound
		{0, 1e-5, 1, false},         // at the bound passes
	} {
		r := &recorder{TB: t}
		w := Compare(r, tol, "v", []float32{c.got}, []float32{c.want})
		if (r.errors > 0) != c.fails {
			t.Errorf("%v vs %v: %d errors, want failure %v", c.got, c.want, r.errors, c.fails)
		}
		if d := w - c.worst; d > 0.05*c.worst+1e-3 || d < -0.05*c.worst-1e-3 {
			t.Errorf("%v vs %v: worst ratio %v, want about %v", c.got, c.want, w, c.worst)
		}
	}
}

func TestMatrices(t *testing.T) {
	w := []float32{1, 2, 3, 4, 5, 6}
	m := Matrix(t, w, 2, 3)
	if m.Rows() != 2 || m.Cols() != 3 {
		t.Fatalf("Matrix is %d×%d, want 2×3", m.Rows(), m.Cols())
	}
	y := make([]float32, 2)
	m.MatVec(y, []float32{1, 1, 1})
	if y[0] != 6 || y[1] != 15 {
		t.Fatalf("f32 row sums %v, want [6 15]", y)
	}
	b := BF16(t, w, 2, 3) // small integers are exact in bf16
	b.MatVec(y, []float32{1, 1, 1})
	if y[0] != 6 || y[1] != 15 {
		t.Fatalf("bf16 row sums %v, want [6 15]", y)
	}
}
