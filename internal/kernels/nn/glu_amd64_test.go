//go:build amd64 && !purego

package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSiTUGLUVectorLoops holds SiTU-GLU with its vector loops to the same
// call with the Go loops, bit for bit, over lengths around the block of
// sixteen and the chunk, on ordinary, saturating and special arguments
// (NaN payloads, infinities, subnormals, signed zeros).
func TestSiTUGLUVectorLoops(t *testing.T) {
	if !useAVX512 {
		t.Skip("CPU lacks AVX-512")
	}
	r := rand.New(rand.NewPCG(61, 62))
	val := func() float32 {
		switch r.IntN(8) {
		case 0:
			return math.Float32frombits(r.Uint32())
		case 1:
			return float32(r.NormFloat64() * 200)
		}
		return float32(r.NormFloat64() * 3)
	}
	for _, n := range []int{1, 15, 16, 17, 47, 100, sigChunk + 37, 3*sigChunk - 1} {
		g, u := make([]float32, n), make([]float32, n)
		for i := range g {
			g[i], u[i] = val(), val()
		}
		g[0], u[n-1] = float32(math.Copysign(0, -1)), float32(math.Inf(-1))
		got, want := make([]float32, n), make([]float32, n)
		SiTUGLU(got, g, u, 4, 25)
		useAVX512 = false
		SiTUGLU(want, g, u, 4, 25)
		useAVX512 = true
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: y[%d] = %v (g %v, u %v), Go loops give %v", n, i, got[i], g[i], u[i], want[i])
			}
		}
	}
}

// BenchmarkSiTUGLU runs SiTU-GLU over an expert's 512 intermediate values
// with the vector loops and with the Go loops in one run.
func BenchmarkSiTUGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(63, 64))
	g, u, y := make([]float32, 512), make([]float32, 512), make([]float32, 512)
	for i := range g {
		g[i], u[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	for _, vec := range []bool{true, false} {
		b.Run(map[bool]string{true: "vector", false: "go"}[vec], func(b *testing.B) {
			old := useAVX512
			useAVX512 = useAVX512 && vec
			defer func() { useAVX512 = old }()
			for b.Loop() {
				SiTUGLU(y, g, u, 4, 25)
			}
		})
	}
}
