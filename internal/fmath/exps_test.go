package fmath

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// expInputs returns arguments covering every path of Exp64: the kernel's
// range and both sides of each of its edges, zeros, subnormals, infinities,
// NaN, and random bit patterns, in an order that puts special arguments
// inside otherwise ordinary blocks of eight.
func expInputs(r *rand.Rand) []float64 {
	edges := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, math.Ln2 / 2, -math.Ln2 / 2,
		tiny, -tiny, math.Nextafter(tiny, 0), -math.Nextafter(tiny, 0), math.Nextafter(tiny, 1),
		708, -708, math.Nextafter(708, 1000), math.Nextafter(-708, -1000), 709.5, -709.5,
		expMax, math.Nextafter(expMax, 1000), expMin, math.Nextafter(expMin, -1000), -740,
		math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, -5e-324, 1e-300, -1e-300, 2.2250738585072014e-308}
	var xs []float64
	for range 20000 {
		xs = append(xs, (r.Float64()-0.5)*1500, (r.Float64()-0.5)*60, r.NormFloat64(),
			math.Float64frombits(r.Uint64()), (r.Float64()-0.5)*1e-7)
	}
	for i, e := range edges {
		xs[(i*37)%len(xs)] = e
	}
	return append(xs, edges...)
}

// Exp64s gives Exp64's bits for every argument, on the kernel (where the
// CPU has it) and on the scalar path, at every offset and length.
func TestExp64sMatchesExp64(t *testing.T) {
	xs := expInputs(rand.New(rand.NewPCG(1, 2)))
	want := make([]float64, len(xs))
	for i, x := range xs {
		want[i] = Exp64(x)
	}
	for _, kernel := range kernelSettings(t) {
		setKernel(kernel)
		for _, off := range []int{0, 1, 5, 8} {
			for _, n := range []int{len(xs) - off, 7, 9, 63, 1000} {
				got := make([]float64, n)
				Exp64s(got, xs[off:off+n])
				for i := range got {
					if math.Float64bits(got[i]) != math.Float64bits(want[off+i]) {
						t.Fatalf("kernel=%v: Exp64s(%v) = %v (%#x), Exp64 gives %v (%#x)", kernel, xs[off+i],
							got[i], math.Float64bits(got[i]), want[off+i], math.Float64bits(want[off+i]))
					}
				}
			}
		}
		// In place.
		in := append([]float64(nil), xs...)
		Exp64s(in, in)
		for i := range in {
			if math.Float64bits(in[i]) != math.Float64bits(want[i]) {
				t.Fatalf("kernel=%v: in place: element %d differs", kernel, i)
			}
		}
	}
	setKernel(true)
}

// Sigmoid32s, SiLU32s and Exp32s give the bits of their scalar forms.
func TestSigmoidSlices(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var xs []float32
	for range 50000 {
		xs = append(xs, float32(r.NormFloat64()*8), float32((r.Float64()-0.5)*2000), math.Float32frombits(r.Uint32()))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e-30, 88, -88, 104, -104)
	for _, kernel := range kernelSettings(t) {
		setKernel(kernel)
		s, l, e := make([]float32, len(xs)), make([]float32, len(xs)), make([]float32, len(xs))
		Sigmoid32s(s, xs)
		SiLU32s(l, xs)
		Exp32s(e, xs)
		for i, x := range xs {
			if we := Exp32(x); math.Float32bits(e[i]) != math.Float32bits(we) {
				t.Fatalf("kernel=%v: Exp32s(%v) = %v, Exp32 gives %v", kernel, x, e[i], we)
			}
			if ws := Sigmoid32(x); math.Float32bits(s[i]) != math.Float32bits(ws) {
				t.Fatalf("kernel=%v: Sigmoid32s(%v) = %v, Sigmoid32 gives %v", kernel, x, s[i], ws)
			}
			// x ⊗ σ(x) for x = NaN multiplies two NaNs, and which payload
			// survives depends on the operand order the compiler picks.
			if wl := SiLU32(x); math.Float32bits(l[i]) != math.Float32bits(wl) && !(l[i] != l[i] && wl != wl) {
				t.Fatalf("kernel=%v: SiLU32s(%v) = %v, SiLU32 gives %v", kernel, x, l[i], wl)
			}
		}
	}
	setKernel(true)
}

func BenchmarkExp64s(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	xs := make([]float64, 4096)
	for i := range xs {
		xs[i] = r.NormFloat64() * 4
	}
	dst := make([]float64, len(xs))
	for _, kernel := range kernelSettings(b) {
		setKernel(kernel)
		name := "scalar"
		if kernel {
			name = "kernel"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(8 * len(xs)))
			for b.Loop() {
				Exp64s(dst, xs)
			}
		})
	}
	setKernel(true)
}

// FuzzExp64s: for any float64 arguments (the bytes read as little-endian
// words), Exp64s gives Exp64's bits on every path.
func FuzzExp64s(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f})
	f.Add(make([]byte, 64))
	f.Add([]byte("\x00\x00\x00\x00\x00\x20\x86\x40\x01\x00\x00\x00\x00\x20\x86\x40\x00\x00\x00\x00\x00\x00\x30\x3e\xff\xff\xff\xff\xff\xff\x2f\x3e"))
	f.Fuzz(func(t *testing.T, data []byte) {
		xs := make([]float64, len(data)/8)
		for i := range xs {
			xs[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		got := make([]float64, len(xs))
		for _, kernel := range kernelSettings(t) {
			setKernel(kernel)
			Exp64s(got, xs)
			for i, x := range xs {
				if w := Exp64(x); math.Float64bits(got[i]) != math.Float64bits(w) {
					t.Fatalf("kernel=%v: Exp64s(%v) = %v, Exp64 gives %v", kernel, x, got[i], w)
				}
			}
		}
		setKernel(true)
	})
}

// Tanh64s gives Tanh64's bits for every argument, on every path.
func TestTanh64sMatchesTanh64(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	edges := []float64{0, math.Copysign(0, -1), tanhSmall, -tanhSmall, math.Nextafter(tanhSmall, 0), math.Nextafter(tanhSmall, 1),
		tanhSat, -tanhSat, math.Nextafter(tanhSat, 100), math.Nextafter(tanhSat, 0), 1e-300, -1e-300, 5e-324, tiny, 0.63, -0.63,
		math.Inf(1), math.Inf(-1), math.NaN(), 1e308, -1e308, 354, 400}
	var xs []float64
	for range 40000 {
		xs = append(xs, r.NormFloat64(), (r.Float64()-0.5)*100, (r.Float64()-0.5)*2, math.Float64frombits(r.Uint64()), r.NormFloat64()*1e-9)
	}
	for i, e := range edges {
		xs[(i*41)%len(xs)] = e
	}
	xs = append(xs, edges...)
	for _, kernel := range kernelSettings(t) {
		setKernel(kernel)
		for _, off := range []int{0, 3} {
			got := make([]float64, len(xs)-off)
			Tanh64s(got, xs[off:])
			for i, x := range xs[off:] {
				if w := Tanh64(x); math.Float64bits(got[i]) != math.Float64bits(w) {
					t.Fatalf("kernel=%v: Tanh64s(%v) = %v (%#x), Tanh64 gives %v (%#x)", kernel, x, got[i], math.Float64bits(got[i]), w, math.Float64bits(w))
				}
			}
		}
	}
	setKernel(true)
}

func BenchmarkTanh64s(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	xs := make([]float64, 4096)
	for i := range xs {
		xs[i] = r.NormFloat64()
	}
	dst := make([]float64, len(xs))
	for _, kernel := range kernelSettings(b) {
		setKernel(kernel)
		name := "scalar"
		if kernel {
			name = "kernel"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(8 * len(xs)))
			for b.Loop() {
				Tanh64s(dst, xs)
			}
		})
	}
	setKernel(true)
}

// FuzzTanh64s: for any float64 arguments, Tanh64s gives Tanh64's bits on
// every path.
func FuzzTanh64s(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0xe4, 0x3f})
	f.Add(make([]byte, 64))
	f.Add([]byte("\x7b\x45\xfc\x78\xe6\x01\x46\x40\x00\x00\x00\x00\x00\x00\xe4\xbf\x00\x00\x00\x00\x00\x00\xf8\x7f\x00\x00\x00\x00\x00\x00\x00\x80"))
	f.Fuzz(func(t *testing.T, data []byte) {
		xs := make([]float64, len(data)/8)
		for i := range xs {
			xs[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		got := make([]float64, len(xs))
		for _, kernel := range kernelSettings(t) {
			setKernel(kernel)
			Tanh64s(got, xs)
			for i, x := range xs {
				if w := Tanh64(x); math.Float64bits(got[i]) != math.Float64bits(w) {
					t.Fatalf("kernel=%v: Tanh64s(%v) = %v, Tanh64 gives %v", kernel, x, got[i], w)
				}
			}
		}
		setKernel(true)
	})
}
