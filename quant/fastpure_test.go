package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/floatbits"
	"github.com/k3-project/k3/internal/testkit"
)

// TestFastEqualsPure compares the dispatched kernels (assembly on amd64 with
// AVX2+FMA unless built with -tags purego) with their pure-Go twins on the
// unrounded float64 sums, over lengths with every kind of tail, group sizes,
// all byte codes (fp8 NaN included) and wide-range activations.
func TestFastEqualsPure(t *testing.T) {
	t.Logf("assembly kernels active: %v", useAVX2)
	rng := rand.New(rand.NewPCG(21, 22))
	same := func(name string, n int, a, b float64) {
		t.Helper()
		if math.Float64bits(a) != math.Float64bits(b) && !(a != a && b != b) {
			t.Fatalf("%s n=%d: fast %v, pure %v", name, n, a, b)
		}
	}
	for trial := range 400 {
		n := rng.IntN(1100)
		if trial < 40 {
			n = trial
		}
		xs := wideFloats(rng, n)
		if n > 6 && trial%3 == 0 {
			xs[1], xs[6] = 1<<60, -(1 << 60)
		}
		x := floatbits.Widen64(nil, xs)
		q8 := testkit.RandomBytes(rng, n)
		q4 := testkit.RandomBytes(rng, (n+1)/2)
		same("r16Int8", n, r16Int8(q8, x), r16Int8Go(q8, x))
		same("r16Int4", n, r16Int4(q4, x), r16Int4Go(q4, x))
		gs := groupSizes[rng.IntN(len(groupSizes))]
		sc := make([]byte, 4*((n+gs-1)/gs+1))
		for i := 0; i < len(sc); i += 4 {
			binary.LittleEndian.PutUint32(sc[i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		same("rgInt4Row", n, rgInt4Row(q4, x, sc, gs), rgInt4RowGo(q4, x, sc, gs))
		sf := make([]byte, 4*((n+127)/128))
		for i := 0; i < len(sf); i += 4 {
			binary.LittleEndian.PutUint32(sf[i:], math.Float32bits(float32(rng.Float64()*3)))
		}
		same("rgFP8Row", n, rgFP8Row(q8, x, sf), rgFP8RowGo(q8, x, sf))
		// Without NaN codes the results must be equal numbers, not just NaN.
		for i, b := range q8 {
			if b&0x7f == 0x7f {
				q8[i] = 0x01
			}
		}
		if a, b := rgFP8Row(q8, x, sf), rgFP8RowGo(q8, x, sf); math.Float64bits(a) != math.Float64bits(b) {
			t.Fatalf("rgFP8Row n=%d without NaN: fast %v, pure %v", n, a, b)
		}
	}
}
