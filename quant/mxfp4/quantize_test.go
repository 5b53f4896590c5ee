package mxfp4

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// oracleCode is an independent statement of the quantiser rule: the code
// whose signed value is nearest to w/2^e, ties to the smaller code, found by
// exhaustive search over the 16 codes.
func oracleCode(w float32, e int) byte {
	v := math.Ldexp(float64(w), -e)
	best, bestD := byte(0), math.Inf(1)
	for c := range 16 {
		ev := float64(E2M1(byte(c)))
		if d := math.Abs(v - ev); d < bestD {
			best, bestD = byte(c), d
		}
	}
	return best
}

// oracleExponent computes ⌊log2(max(amax, 1e−30))⌋ − 2 by repeated halving
// and doubling, independently of Frexp.
func oracleExponent(amax float64) int {
	a := max(amax, 1e-30)
	k := 0
	for a >= 2 {
		a /= 2
		k++
	}
	for a < 1 {
		a *= 2
		k--
	}
	return k - 2
}

func TestQuantizeMatchesRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := range 200 {
		rows, cols := 1+rng.IntN(5), 32*(1+rng.IntN(4))
		w := make([]float32, rows*cols)
		scale := math.Ldexp(1, rng.IntN(200)-100)
		for i := range w {
			switch rng.IntN(10) {
			case 0:
				w[i] = 0
			case 1: // exact ties between magnitudes at this block's scale
				w[i] = float32(scale * (0.25 + 0.5*float64(rng.IntN(12))))
			default:
				w[i] = float32(rng.NormFloat64() * scale)
			}
		}
		if trial%7 == 0 {
			w[rng.IntN(len(w))] = float32(math.Copysign(0, -1))
		}
		packed, scales, err := Quantize(w, rows, cols)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for g := range scales {
			blk := w[g*32 : (g+1)*32]
			amax := 0.0
			for _, v := range blk {
				amax = max(amax, math.Abs(float64(v)))
			}
			e := oracleExponent(amax)
			if int(scales[g]) != e+127 {
				t.Fatalf("block %d: scale byte %d, want %d", g, scales[g], e+127)
			}
			for j, v := range blk {
				i := g*32 + j
				code := packed[i/2] >> (4 * (i % 2)) & 15
				if want := oracleCode(v, e); code != want {
					t.Fatalf("element %d = %v (block e=%d): code %d, want %d", i, v, e, code, want)
				}
			}
		}
	}
}

func TestQuantizeCases(t *testing.T) {
	// Block max 6 → e = 0 (2^2·1.5 → ⌊log2 6⌋ = 2); values at exact
	// midpoints go to the smaller code; negative tiny values become +0.
	w := make([]float32, 32)
	copy(w, []float32{6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -0.75, -5, -6, float32(math.Copysign(0, -1)), -0.1, 7.9, 0.26})
	packed, scales, err := Quantize(w, 1, 32)
	if err != nil {
		t.Fatal(err)
	}
	if scales[0] != 127 {
		t.Fatalf("scale byte %d, want 127", scales[0])
	}
	want := []byte{7, 0, 1, 2, 3, 4, 5, 6, 0, 9, 14, 15, 0, 0, 7, 1}
	for i, c := range want {
		if got := packed[i/2] >> (4 * (i % 2)) & 15; got != c {
			t.Errorf("w[%d] = %v: code %d, want %d", i, w[i], got, c)
		}
	}
	// Exponent from the float bits at and just below powers of two, where a
	// rounded log2 would be off by one.
	for k := -99; k <= 127; k++ {
		p := float32(math.Ldexp(1, k))
		below := math.Nextafter32(p, 0)
		for _, v := range []float32{p, below} {
			blk := make([]float32, 32)
			blk[3] = v
			e, err := blockExponent(blk)
			if err != nil {
				t.Fatal(err)
			}
			if want := oracleExponent(float64(v)); e != want {
				t.Fatalf("amax %g: e = %d, want %d", v, e, want)
			}
		}
	}
	// amax below 1e−30 is floored: ⌊log2 1e−30⌋ − 2 = −102.
	blk := make([]float32, 32)
	blk[0] = 1e-35
	if e, _ := blockExponent(blk); e != -102 {
		t.Errorf("tiny block: e = %d, want -102", e)
	}
}

func TestQuantizeRefuses(t *testing.T) {
	w := make([]float32, 64)
	if _, _, err := Quantize(w, 2, 32); !errors.Is(err, ErrAllZero) {
		t.Errorf("zeros: %v", err)
	}
	w[5] = 1e-20 // alone in its block: 1e−20/2^−69 ≈ 5.9 → code 7 (6)
	if p, _, err := Quantize(w, 2, 32); err != nil || p[2]>>4 != 7 {
		t.Errorf("single tiny value: %v", err)
	}
	w[5] = float32(math.NaN())
	if _, _, err := Quantize(w, 2, 32); !errors.Is(err, ErrNonFinite) {
		t.Errorf("NaN: %v", err)
	}
	w[5] = float32(math.Inf(-1))
	if _, _, err := Quantize(w, 2, 32); !errors.Is(err, ErrNonFinite) {
		t.Errorf("-Inf: %v", err)
	}
	if _, _, err := Quantize(w[:48], 1, 48); !errors.Is(err, ErrWidth) {
		t.Errorf("width 48: %v", err)
	}
	if _, _, err := Quantize(w[:32], 2, 32); !errors.Is(err, ErrShape) {
		t.Errorf("short w: %v", err)
	}
	if _, _, err := Quantize(nil, 0, 32); !errors.Is(err, ErrAllZero) {
		t.Errorf("empty: %v", err)
	}
}

// TestQuantizeMatVec: for random matrices, quantize → MatVec equals
// dequantize → RG-ordered float64 dot, bit for bit, on every kernel.
func TestQuantizeMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for range 20 {
		rows, cols := 1+rng.IntN(20), 32*(1+rng.IntN(8))
		w := randVec(rng, rows*cols)
		packed, scales, err := Quantize(w, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		deq := make([]float32, rows*cols)
		if err := Dequantize(deq, packed, scales, rows, cols); err != nil {
			t.Fatal(err)
		}
		x := randVecWild(rng, cols)
		requireKernels(t, packed, scales, x, refMatVec(deq, x, rows))
	}
}
