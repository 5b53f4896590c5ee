package fmath

import (
	"math"
	"math/big"
	"testing"
)

const bigPrec = 160

var bigLn2, _ = new(big.Float).SetPrec(bigPrec).SetString(
	"0.6931471805599453094172321214581765680755001343602552541206800094933936219696947156058633269964186875")

// bigExp returns e**x rounded to float64 from a 160-bit computation:
// x = k·ln2 + r, e**r by its Taylor series, times 2**k. It is an independent
// reference for the ranges where math.Exp's assembly is itself inexact or
// overflows early (amd64 returns +Inf a little below the true threshold).
func bigExp(x float64) float64 {
	f, _ := bigExpF(x).Float64()
	return f
}

func bigExpF(x float64) *big.Float {
	k := math.Round(x / math.Ln2)
	bx := new(big.Float).SetPrec(bigPrec).SetFloat64(x)
	kl := new(big.Float).SetPrec(bigPrec).Mul(new(big.Float).SetPrec(bigPrec).SetFloat64(k), bigLn2)
	r := new(big.Float).SetPrec(bigPrec).Sub(bx, kl)
	sum := new(big.Float).SetPrec(bigPrec).SetInt64(1)
	term := new(big.Float).SetPrec(bigPrec).SetInt64(1)
	for n := int64(1); n < 40; n++ {
		term.Mul(term, r)
		term.Quo(term, new(big.Float).SetPrec(bigPrec).SetInt64(n))
		sum.Add(sum, term)
	}
	return sum.SetMantExp(sum, int(k))
}

// bigTanh returns tanh(x) rounded from (E−1)/(E+1), E = e**(2|x|) in 160 bits.
func bigTanh(x float64) float64 {
	if x == 0 || math.Abs(x) > 30 {
		return math.Tanh(x) // ±0, or ±1 to the last bit
	}
	if math.Abs(x) < 1e-5 {
		// The series x − x³/3 + 2x⁵/15 is exact enough here; E−1 would cancel.
		bx := new(big.Float).SetPrec(bigPrec).SetFloat64(x)
		x3 := new(big.Float).SetPrec(bigPrec).Mul(bx, bx)
		x3.Mul(x3, bx)
		x5 := new(big.Float).SetPrec(bigPrec).Mul(x3, bx)
		x5.Mul(x5, bx)
		x3.Quo(x3, big.NewFloat(3))
		x5.Mul(x5, big.NewFloat(2))
		x5.Quo(x5, big.NewFloat(15))
		bx.Sub(bx, x3)
		bx.Add(bx, x5)
		f, _ := bx.Float64()
		return f
	}
	e := bigExpF(2 * math.Abs(x))
	one := new(big.Float).SetPrec(bigPrec).SetInt64(1)
	num := new(big.Float).SetPrec(bigPrec).Sub(e, one)
	den := new(big.Float).SetPrec(bigPrec).Add(e, one)
	num.Quo(num, den)
	f, _ := num.Float64()
	return math.Copysign(f, x)
}

func TestExp64VsBig(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 4000
	}
	checkRange(t, "Exp64/big", Exp64, bigExp, 1, n, 21, 700, expMax)
	checkRange(t, "Exp64/big", Exp64, bigExp, 1, n, 22, expMin, -700)
	checkRange(t, "Exp64/big", Exp64, bigExp, 1, n, 23, -3, 3)
	for _, x := range []float64{expMax, math.Nextafter(expMax, 0), expMin, -744.44, -708.4, 1e-9} {
		if got, want := Exp64(x), bigExp(x); ulps(got, want) > 1 {
			t.Errorf("Exp64(%v) = %v, want %v", x, got, want)
		}
	}
}

func TestTanh64VsBig(t *testing.T) {
	n := 50_000
	if testing.Short() {
		n = 10_000
	}
	checkRange(t, "Tanh64/big", Tanh64, bigTanh, 1, n, 31, -1, 1)
	checkRange(t, "Tanh64/big", Tanh64, bigTanh, 1, n, 32, 0.55, 0.75)
	checkRange(t, "Tanh64/big", Tanh64, bigTanh, 1, n, 33, -25, 25)
	checkRange(t, "Tanh64/big", Tanh64, bigTanh, 1, n, 34, -1e-6, 1e-6)
}
