package strictjson

import (
	"math"
	"strconv"
)

// scanNumber returns the length of the RFC 8259 number at the start of s, or
// 0 and a description when s does not start with a well-formed number.
// Grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(s []byte) (int, string) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s) || !isDigit(s[i]):
		return 0, "minus sign not followed by a digit"
	case s[i] == '0':
		i++
		if i < len(s) && isDigit(s[i]) {
			return 0, "leading zero in number"
		}
	default:
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return 0, "no digit after decimal point"
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return 0, "no digit in exponent"
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i, ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseInt64 converts a well-formed JSON number literal to int64 exactly.
// The value is digits × 10^exp where digits are the integer and fraction
// digits together; trailing zeros absorb a negative exponent and leading zeros
// are dropped, so the magnitude can be judged before any arithmetic.
func parseInt64(s string) (int64, error) {
	neg := false
	i := 0
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	digits := make([]byte, 0, 24)
	exp := int64(0)
	for ; i < len(s) && isDigit(s[i]); i++ {
		digits = append(digits, s[i])
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isDigit(s[i]); i++ {
			digits = append(digits, s[i])
			exp--
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		// Saturate: any exponent beyond ±1e12 decides the answer on its own
		// (overflow, or a fraction) because literals are shorter than that.
		e := int64(0)
		for ; i < len(s) && isDigit(s[i]); i++ {
			if e < 1e12 {
				e = e*10 + int64(s[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	// Drop leading zeros; an all-zero literal is 0 whatever its exponent.
	k := 0
	for k < len(digits) && digits[k] == '0' {
		k++
	}
	digits = digits[k:]
	if len(digits) == 0 {
		return 0, nil
	}
	for exp < 0 {
		if digits[len(digits)-1] != '0' {
			return 0, ErrNotInteger
		}
		digits = digits[:len(digits)-1]
		exp++
		// digits[0] is non-zero, so digits never runs empty here.
	}
	// int64 has at most 19 decimal digits.
	if int64(len(digits))+exp > 19 {
		return 0, ErrRange
	}
	for ; exp > 0; exp-- {
		digits = append(digits, '0')
	}
	u, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil {
		return 0, ErrRange
	}
	if neg {
		if u > 1<<63 {
			return 0, ErrRange
		}
		return -int64(u), nil // for u == 1<<63 this wraps to MinInt64, as intended
	}
	if u > math.MaxInt64 {
		return 0, ErrRange
	}
	return int64(u), nil
}

// parseFloat64 converts a well-formed JSON number literal to a finite float64.
func parseFloat64(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, ErrRange
	}
	return f, nil
}
