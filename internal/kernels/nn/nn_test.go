package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSoftmaxProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + r.IntN(40)
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.NormFloat64() * 30)
		}
		p := make([]float32, n)
		Softmax(p, s)
		var sum, m float64
		for i := range p {
			sum += float64(p[i])
			m = max(m, float64(s[i]))
		}
		if math.Abs(sum-1) > 1e-6 {
			t.Fatalf("softmax sums to %v", sum)
		}
		// Independent f64 reference.
		var z float64
		for _, v := range s {
			z += math.Exp(float64(v) - m)
		}
		for i, v := range s {
			want := math.Exp(float64(v)-m) / z
			if math.Abs(float64(p[i])-want) > 1e-7+1e-6*want {
				t.Fatalf("p[%d] = %v, want %v", i, p[i], want)
			}
		}
	}
	// Large scores never overflow (the maximum is subtracted first).
	p := make([]float32, 2)
	Softmax(p, []float32{1e30, 1e30})
	if p[0] != 0.5 || p[1] != 0.5 {
		t.Errorf("softmax of equal huge scores = %v", p)
	}
	Softmax(nil, nil) // empty is a no-op
}

func TestNormsMatchFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		n := 1 + r.IntN(300)
		x, w := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * 3)
			w[i] = float32(r.NormFloat64())
		}
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		y := make([]float32, n)
		RMSNorm(y, x, w, 1e-5)
		rms := 1 / math.Sqrt(ss/float64(n)+1e-5)
		for i := range y {
			want := float64(w[i]) * float64(x[i]) * rms
			if math.Abs(float64(y[i])-want) > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("RMSNorm[%d] = %v, want %v", i, y[i], want)
			}
		}
		L2Norm(y, x)
		l2 := 1 / math.Sqrt(ss+1e-6)
		for i := range y {
			want := float64(x[i]) * l2
			if math.Abs(float64(y[i])-want) > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("L2Norm[%d] = %v, want %v", i, y[i], want)
			}
		}
	}
	// The L2 epsilon keeps a zero vector finite.
	z := make([]float32, 4)
	L2Norm(z, z)
	for _, v := range z {
		if v != 0 {
			t.Fatalf("L2Norm(0) = %v", z)
		}
	}
}

func TestSiTUGLUSaturatesAndUsesUncappedSigmoid(t *testing.T) {
	// For large g the gate → β1·1·1 and the up half → β2·sign(u).
	y := make([]float32, 2)
	SiTUGLU(y, []float32{1e6, -1e6}, []float32{1e6, 1e6}, 4, 25)
	if y[0] != 100 || y[1] != 0 {
		t.Errorf("saturation: %v", y)
	}
	// Moderate g: σ takes g itself, not the capped β1·tanh(g/β1).
	g, u := float32(6), float32(1)
	SiTUGLU(y[:1], []float32{g}, []float32{u}, 4, 25)
	want := 4 * math.Tanh(6.0/4) / (1 + math.Exp(-6)) * 25 * math.Tanh(1.0/25)
	if math.Abs(float64(y[0])-want) > 1e-5*want {
		t.Errorf("SiTUGLU(6, 1) = %v, want %v", y[0], want)
	}
}

func TestAttnResErrorsAndRawValues(t *testing.T) {
	if _, err := NewAttnRes([]float32{1, 2}, []float32{1}, 1e-5); err == nil {
		t.Error("mismatched norm/proj accepted")
	}
	a, _ := NewAttnRes([]float32{1, 1}, []float32{0, 0}, 1e-5)
	dst := make([]float32, 2)
	if err := a.Apply(dst, nil); err == nil {
		t.Error("no sources accepted")
	}
	if err := a.Apply(dst, [][]float32{{1}}); err == nil {
		t.Error("short source accepted")
	}
	// A zero pseudo-query gives uniform weights over the RAW sources.
	if err := a.Apply(dst, [][]float32{{2, 4}, {6, 8}}); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 4 || dst[1] != 6 {
		t.Errorf("uniform aggregate = %v, want [4 6]", dst)
	}
}

func TestResidualValidate(t *testing.T) {
	a, _ := NewAttnRes([]float32{1, 1}, []float32{1, 1}, 1e-5)
	r := &Residual{InputNorm: F32([]float32{1, 1}), PostNorm: F32([]float32{1}), AttnRes: a, MLPRes: a, Eps: 1e-5}
	if err := r.Validate(2); err == nil {
		t.Error("short post norm accepted")
	}
	r.PostNorm = F32([]float32{1, 1})
	r.MLPRes = nil
	if err := r.Validate(2); err == nil {
		t.Error("missing aggregator accepted")
	}
	if _, err := NewStream(make([]float32, 3), 2, 2); err == nil {
		t.Error("mis-sized stream accepted")
	}
}

// TestFourChainsMatchSequential holds the four-chain forms (RMSNormRows,
// AttnRes.Apply's keys) to the one-row statements they replace, bit for bit,
// for every count of rows or sources mod 4.
func TestFourChainsMatchSequential(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	const e = 131
	// spread: the exponent range of the values. The AttnRes weights stay
	// near 1 so that the scores differ by a few units and the softmax weighs
	// every source (a one-hot softmax would hide a wrong score).
	vec := func(n int, s float64, spread int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * s * math.Exp2(float64(r.IntN(2*spread+1)-spread)))
		}
		return v
	}
	w := vec(e, 1, 10)
	a, err := NewAttnRes(vec(e, 0.3, 0), vec(e, 0.3, 0), 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 9; n++ {
		x := vec(n*e, 1, 10)
		got := make([]float32, n*e)
		RMSNormRows(got, x, w, 1e-5)
		for i := range n {
			want := make([]float32, e)
			RMSNorm(want, x[i*e:(i+1)*e], w, 1e-5)
			for j := range want {
				if math.Float32bits(got[i*e+j]) != math.Float32bits(want[j]) {
					t.Fatalf("RMSNormRows of %d rows: row %d [%d] = %v, want %v", n, i, j, got[i*e+j], want[j])
				}
			}
		}
		src := make([][]float32, n)
		for i := range src {
			src[i] = vec(e, 3, 10)
		}
		dst := make([]float32, e)
		if err := a.Apply(dst, src); err != nil {
			t.Fatal(err)
		}
		// The statement: score_s = f32(Σ f64(x ⊗ r_s)·f64(fold)), softmax, then
		// dst = Σ_s p_s ⊗ x_s in source order.
		p := make([]float32, n)
		for s, v := range src {
			rs := RMSScale(v, 1e-5)
			var d float64
			for i, x := range v {
				d += float64(x*rs) * float64(a.Fold()[i])
			}
			p[s] = float32(d)
		}
		Softmax(p, p)
		want := make([]float32, e)
		for s, v := range src {
			for i, x := range v {
				want[i] = want[i] + float32(p[s]*x)
			}
		}
		for i := range want {
			if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
				t.Fatalf("AttnRes of %d sources [%d] = %v, want %v", n, i, dst[i], want[i])
			}
		}
	}
}
