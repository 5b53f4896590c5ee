package attention

import (
	"hash/fnv"
	"math"
	"testing"

	"github.com/k3-project/k3/quant"
)

func mat(t testing.TB, w []float32, rows, cols int) quant.Matrix {
	t.Helper()
	m, err := quant.F32FromFloats(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// digest is an FNV-1a hash of float bit patterns, for bit-identity checks.
func digest(vs ...[]float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, v := range vs {
		for _, f := range v {
			u := math.Float32bits(f)
			b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v (%#x), want %v (%#x): not bit-identical", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}
