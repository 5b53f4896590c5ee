package testkit

import (
	"hash/fnv"
	"math"
	"testing"
)

// Digest is an FNV-1a hash of the float32 bit patterns of vs, in order,
// little-endian: equal digests mean bit-identical values, so runs of
// different builds, worker counts and schedules compare by one number
// (§5.4).
func Digest(vs ...[]float32) uint64 {
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

// SameBits reports whether a and b have the same length and bit patterns
// (so −0 differs from +0, and NaNs compare by payload).
func SameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// RequireSameBits fails the test at the first element where got and want
// differ in bits, or when their lengths differ; what names the values.
func RequireSameBits(tb testing.TB, what string, got, want []float32) {
	tb.Helper()
	requireBits(tb, what, got, want, false)
}

// RequireSameBitsOrNaN is RequireSameBits where any NaN equals any NaN: for
// kernels whose NaN payloads the hardware, not the code, decides.
func RequireSameBitsOrNaN(tb testing.TB, what string, got, want []float32) {
	tb.Helper()
	requireBits(tb, what, got, want, true)
}

func requireBits(tb testing.TB, what string, got, want []float32, anyNaN bool) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := math.Float32bits(got[i]), math.Float32bits(want[i])
		if g == w || anyNaN && got[i] != got[i] && want[i] != want[i] {
			continue
		}
		tb.Fatalf("%s[%d] = %v (%#08x), want %v (%#08x): not bit-identical", what, i, got[i], g, want[i], w)
	}
}
