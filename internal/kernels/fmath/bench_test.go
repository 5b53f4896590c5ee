package fmath

import (
	"math"
	"testing"
)

var sink float64

func benchArgs() []float64 {
	xs := make([]float64, 1024)
	for i := range xs {
		xs[i] = float64(i-512) * 0.0371
	}
	return xs
}

func BenchmarkExp64(b *testing.B) {
	xs := benchArgs()
	for b.Loop() {
		for _, x := range xs {
			sink += Exp64(x)
		}
	}
}

// BenchmarkMathExp is the standard library's (assembly) exp, for scale.
func BenchmarkMathExp(b *testing.B) {
	xs := benchArgs()
	for b.Loop() {
		for _, x := range xs {
			sink += math.Exp(x)
		}
	}
}

func BenchmarkTanh64(b *testing.B) {
	xs := benchArgs()
	for b.Loop() {
		for _, x := range xs {
			sink += Tanh64(x * 0.1)
		}
	}
}

func BenchmarkMathTanh(b *testing.B) {
	xs := benchArgs()
	for b.Loop() {
		for _, x := range xs {
			sink += math.Tanh(x * 0.1)
		}
	}
}

func BenchmarkSigmoid32(b *testing.B) {
	xs := benchArgs()
	for b.Loop() {
		for _, x := range xs {
			sink += float64(Sigmoid32(float32(x)))
		}
	}
}
