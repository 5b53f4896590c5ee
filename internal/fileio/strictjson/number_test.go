package strictjson

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
)

func num(t *testing.T, lit string) *Value {
	t.Helper()
	v, err := Parse([]byte(lit))
	if err != nil {
		t.Fatalf("Parse(%q): %v", lit, err)
	}
	return v
}

func TestInt64(t *testing.T) {
	cases := []struct {
		lit  string
		want int64
		err  error
	}{
		{"0", 0, nil},
		{"-0", 0, nil},
		{"0.000", 0, nil},
		{"0e999999999999999999999", 0, nil},
		{"-0.0e-5", 0, nil},
		{"7", 7, nil},
		{"-7", -7, nil},
		{"1.0", 1, nil},
		{"1e3", 1000, nil},
		{"1E+3", 1000, nil},
		{"-1.50e2", -150, nil},
		{"10e-1", 1, nil},
		{"1000e-3", 1, nil},
		{"0.1e1", 1, nil},
		{"0.001e3", 1, nil},
		{"163840", 163840, nil},
		{"9223372036854775807", math.MaxInt64, nil},
		{"-9223372036854775808", math.MinInt64, nil},
		{"922337203685477580.7e1", math.MaxInt64, nil},
		{"92233720368547758070e-1", math.MaxInt64, nil},
		{"9007199254740993", 9007199254740993, nil}, // not representable in float64
		{"1e18", 1e18, nil},
		{"000", 0, errSkipParse},
		{"9223372036854775808", 0, ErrRange},
		{"-9223372036854775809", 0, ErrRange},
		{"1e19", 0, ErrRange},
		{"10000000000000000000", 0, ErrRange},
		{"18446744073709551616", 0, ErrRange},
		{"1e99999999999999999999", 0, ErrRange},
		{"1.5", 0, ErrNotInteger},
		{"-0.5", 0, ErrNotInteger},
		{"1e-1", 0, ErrNotInteger},
		{"12.30e1", 123, nil},
		{"12.34e1", 0, ErrNotInteger},
		{"1e-99999999999999999999", 0, ErrNotInteger},
		{"99999999999999999999e-1", 0, ErrNotInteger},
		{"1.0000000000000000000000001", 0, ErrNotInteger},
	}
	for _, c := range cases {
		if c.err == errSkipParse {
			if _, err := Parse([]byte(c.lit)); err == nil {
				t.Errorf("Parse(%q) accepted", c.lit)
			}
			continue
		}
		got, err := num(t, c.lit).Int64()
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Int64(%s) = %d, %v; want %v", c.lit, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Int64(%s) = %d, %v; want %d", c.lit, got, err, c.want)
		}
	}
}

var errSkipParse = errors.New("literal must not parse")

// bigInt64 is an independent reference: exact rational arithmetic.
func bigInt64(lit string) (int64, error) {
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		panic("bad literal " + lit)
	}
	if !r.IsInt() {
		return 0, ErrNotInteger
	}
	if !r.Num().IsInt64() {
		return 0, ErrRange
	}
	return r.Num().Int64(), nil
}

func randLiteral(r *rand.Rand) string {
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
			if r.IntN(3) == 0 {
				b[i] = '0'
			}
		}
		return string(b)
	}
	s := ""
	if r.IntN(2) == 0 {
		s = "-"
	}
	if r.IntN(4) == 0 {
		s += "0"
	} else {
		s += string(byte('1'+r.IntN(9))) + digits(r.IntN(22))
	}
	if r.IntN(2) == 0 {
		s += "." + digits(1+r.IntN(6))
	}
	if r.IntN(2) == 0 {
		s += "e" + []string{"", "+", "-"}[r.IntN(3)] + strconv.Itoa(r.IntN(25))
	}
	return s
}

func TestInt64AgainstBigRat(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		lit := randLiteral(r)
		want, werr := bigInt64(lit)
		got, err := num(t, lit).Int64()
		switch {
		case werr != nil:
			if !errors.Is(err, werr) {
				t.Fatalf("Int64(%s) = %d, %v; big.Rat says %v", lit, got, err, werr)
			}
		case err != nil || got != want:
			t.Fatalf("Int64(%s) = %d, %v; big.Rat says %d", lit, got, err, want)
		}
	}
}

func TestIntPlatform(t *testing.T) {
	if n, err := num(t, "2e9").Int(); err != nil || n != 2e9 {
		t.Errorf("Int(2e9) = %d, %v", n, err)
	}
	if _, err := num(t, "0.5").Int(); !errors.Is(err, ErrNotInteger) {
		t.Errorf("Int(0.5): %v", err)
	}
}

func TestFloat64(t *testing.T) {
	cases := []struct {
		lit  string
		want float64
		err  error
	}{
		{"1e-05", 1e-5, nil},
		{"-5.0", -5, nil},
		{"25", 25, nil},
		{"0.1767766952966369", 0.1767766952966369, nil},
		{"1.7976931348623157e308", math.MaxFloat64, nil},
		{"4.9e-324", math.SmallestNonzeroFloat64, nil},
		{"1e-400", 0, nil},
		{"-0", math.Copysign(0, -1), nil},
		{"1e309", 0, ErrRange},
		{"-1e309", 0, ErrRange},
		{"1.8e308", 0, ErrRange},
	}
	for _, c := range cases {
		got, err := num(t, c.lit).Float64()
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Float64(%s) = %v, %v; want %v", c.lit, got, err, c.err)
			}
			continue
		}
		if err != nil || math.Float64bits(got) != math.Float64bits(c.want) {
			t.Errorf("Float64(%s) = %v, %v; want %v", c.lit, got, err, c.want)
		}
	}
}
