package fmath

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// sliceForms pairs each float64 slice form with the scalar function it must
// reproduce bit for bit, and the arguments that cover the scalar's paths.
var sliceForms = []struct {
	name   string
	slice  func(dst, x []float64)
	scalar func(float64) float64
	inputs func(*rand.Rand) []float64
}{
	{"Exp64s", Exp64s, Exp64, expInputs},
	{"Tanh64s", Tanh64s, Tanh64, tanhInputs},
}

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
	return spread(xs, edges)
}

// tanhInputs is expInputs for Tanh64: both sides of 0.625 and of the
// saturation point, zeros, tiny and huge values, NaN.
func tanhInputs(r *rand.Rand) []float64 {
	edges := []float64{0, math.Copysign(0, -1), tanhSmall, -tanhSmall, math.Nextafter(tanhSmall, 0), math.Nextafter(tanhSmall, 1),
		tanhSat, -tanhSat, math.Nextafter(tanhSat, 100), math.Nextafter(tanhSat, 0), 1e-300, -1e-300, 5e-324, tiny, 0.63, -0.63,
		math.Inf(1), math.Inf(-1), math.NaN(), 1e308, -1e308, 354, 400}
	var xs []float64
	for range 40000 {
		xs = append(xs, r.NormFloat64(), (r.Float64()-0.5)*100, (r.Float64()-0.5)*2, math.Float64frombits(r.Uint64()), r.NormFloat64()*1e-9)
	}
	// Runs below 0.625, so whole blocks take only the rational form (the
	// kernel skips tanhMid there), some with one edge spread into them.
	for range 8000 {
		xs = append(xs, (r.Float64()-0.5)*1.24)
	}
	return spread(xs, edges)
}

// spread puts the edges inside xs (so they share blocks with ordinary
// arguments) and after it.
func spread(xs, edges []float64) []float64 {
	for i, e := range edges {
		xs[(i*37)%len(xs)] = e
	}
	return append(xs, edges...)
}

// Every slice form gives its scalar function's bits for every argument, on
// the kernel (where the CPU has it) and on the scalar path, at every offset
// and length, and in place.
func TestSliceFormsMatchScalar(t *testing.T) {
	for _, f := range sliceForms {
		xs := f.inputs(rand.New(rand.NewPCG(1, 2)))
		want := make([]float64, len(xs))
		for i, x := range xs {
			want[i] = f.scalar(x)
		}
		for _, kernel := range kernelSettings(t) {
			setKernel(kernel)
			for _, off := range []int{0, 1, 5, 8} {
				for _, n := range []int{len(xs) - off, 7, 9, 63, 1000} {
					got := make([]float64, n)
					f.slice(got, xs[off:off+n])
					for i := range got {
						if math.Float64bits(got[i]) != math.Float64bits(want[off+i]) {
							t.Fatalf("kernel=%s: %s(%v) = %v (%#x), the scalar gives %v (%#x)", kernel, f.name, xs[off+i],
								got[i], math.Float64bits(got[i]), want[off+i], math.Float64bits(want[off+i]))
						}
					}
				}
			}
			in := append([]float64(nil), xs...)
			f.slice(in, in)
			for i := range in {
				if math.Float64bits(in[i]) != math.Float64bits(want[i]) {
					t.Fatalf("kernel=%s: %s in place: element %d differs", kernel, f.name, i)
				}
			}
		}
	}
	setKernel("")
}

// Sigmoid32s and Exp32s give the bits of their scalar forms.
func TestFloat32SliceForms(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var xs []float32
	for range 50000 {
		xs = append(xs, float32(r.NormFloat64()*8), float32((r.Float64()-0.5)*2000), math.Float32frombits(r.Uint32()))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e-30, 88, -88, 104, -104)
	for _, kernel := range kernelSettings(t) {
		setKernel(kernel)
		s, e := make([]float32, len(xs)), make([]float32, len(xs))
		Sigmoid32s(s, xs)
		Exp32s(e, xs)
		for i, x := range xs {
			if we := Exp32(x); math.Float32bits(e[i]) != math.Float32bits(we) {
				t.Fatalf("kernel=%s: Exp32s(%v) = %v, Exp32 gives %v", kernel, x, e[i], we)
			}
			if ws := Sigmoid32(x); math.Float32bits(s[i]) != math.Float32bits(ws) {
				t.Fatalf("kernel=%s: Sigmoid32s(%v) = %v, Sigmoid32 gives %v", kernel, x, s[i], ws)
			}
		}
	}
	setKernel("")
}

// BenchmarkSliceForms times each slice form on the kernel and on the scalar
// path in the same run; their ratio is the kernel's speed-up.
func BenchmarkSliceForms(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	// wide: N(0, 4²), most tanh arguments in tanhMid's range; narrow:
	// N(0, 0.25²), almost none; mixed: N(0, 1), about half, so that most
	// blocks of eight take both paths (SiTU-GLU's g/β1 in the perf model).
	wide, narrow, mixed := make([]float64, 4096), make([]float64, 4096), make([]float64, 4096)
	for i := range wide {
		wide[i] = r.NormFloat64() * 4
		narrow[i] = r.NormFloat64() / 4
		mixed[i] = r.NormFloat64()
	}
	dst := make([]float64, len(wide))
	for _, f := range sliceForms {
		for _, kernel := range kernelSettings(b) {
			setKernel(kernel)
			name := f.name + "/" + kernel
			for _, in := range []struct {
				name string
				xs   []float64
			}{{"wide", wide}, {"narrow", narrow}, {"mixed", mixed}} {
				b.Run(name+"/"+in.name, func(b *testing.B) {
					b.SetBytes(int64(8 * len(in.xs)))
					for b.Loop() {
						f.slice(dst, in.xs)
					}
				})
			}
		}
	}
	setKernel("")
}

// FuzzSliceForms: for any float64 arguments (the bytes read as
// little-endian words), every slice form gives its scalar function's bits on
// every path.
func FuzzSliceForms(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f})
	f.Add(make([]byte, 64))
	f.Add([]byte("\x00\x00\x00\x00\x00\x20\x86\x40\x01\x00\x00\x00\x00\x20\x86\x40\x00\x00\x00\x00\x00\x00\x30\x3e\xff\xff\xff\xff\xff\xff\x2f\x3e"))
	f.Add([]byte("\x7b\x45\xfc\x78\xe6\x01\x46\x40\x00\x00\x00\x00\x00\x00\xe4\xbf\x00\x00\x00\x00\x00\x00\xf8\x7f\x00\x00\x00\x00\x00\x00\x00\x80"))
	f.Fuzz(func(t *testing.T, data []byte) {
		xs := make([]float64, len(data)/8)
		for i := range xs {
			xs[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		got := make([]float64, len(xs))
		for _, sf := range sliceForms {
			for _, kernel := range kernelSettings(t) {
				setKernel(kernel)
				sf.slice(got, xs)
				for i, x := range xs {
					if w := sf.scalar(x); math.Float64bits(got[i]) != math.Float64bits(w) {
						t.Fatalf("kernel=%s: %s(%v) = %v, the scalar gives %v", kernel, sf.name, x, got[i], w)
					}
				}
			}
		}
		setKernel("")
	})
}

// BenchmarkSigmoid32s times the float32 sigmoid slice form (the KDA and MLA
// gates, SiTU-GLU) on the kernel and on the scalar path in one run.
func BenchmarkSigmoid32s(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	xs, dst := make([]float32, 4096), make([]float32, 4096)
	for i := range xs {
		xs[i] = float32(r.NormFloat64() * 4)
	}
	for _, kernel := range kernelSettings(b) {
		setKernel(kernel)
		b.Run(kernel, func(b *testing.B) {
			b.SetBytes(int64(4 * len(xs)))
			for b.Loop() {
				Sigmoid32s(dst, xs)
			}
		})
	}
	setKernel("")
}
