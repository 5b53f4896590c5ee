package dot

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

func TestZeroSizes(t *testing.T) {
	for _, f := range formats {
		if got := f.dot(nil, nil); math.Float32bits(got) != 0 {
			t.Errorf("%s: empty dot = %g, want +0", f.name, got)
		}
		dst := []float32{7, 7}
		f.matVec(dst, nil, nil)
		if dst[0] != 0 || dst[1] != 0 {
			t.Errorf("%s: MatVec with zero cols = %v, want zeros", f.name, dst)
		}
		f.matVec(nil, nil, []float32{1, 2}) // zero rows: nothing to do
		f.matMul(nil, 0, nil, nil, 0)
		f.matMul(nil, 0, nil, []float32{1, 2}, 1) // zero rows
	}
}

func TestBadShapesPanic(t *testing.T) {
	x := make([]float32, 16)
	w := make([]byte, 2*16)
	cases := []struct {
		name, want string
		fn         func()
	}{
		{"dot", "len(w)=32 bytes, want 4·len(x)", func() { F32(w, x) }},
		{"F32Float", "len(w)=3", func() { F32Float(make([]float32, 3), x) }},
		{"MatVec", "want rows·cols·2", func() { MatVecBF16(make([]float32, 2), w, x) }},
		{"MatMul n<0", "negative n", func() { MatMulBF16(nil, 1, w, x, -1) }},
		{"MatMul n=0", "n=0 but len(x)=16", func() { MatMulBF16(nil, 1, w, x, 0) }},
		{"MatMul x", "not a multiple of n=3", func() { MatMulBF16(nil, 1, w, x, 3) }},
		{"MatMul cols=0", "zero columns", func() { MatMulBF16(nil, 1, w, nil, 2) }},
		{"MatMul w", "not a multiple of the row size", func() { MatMulBF16(make([]float32, 4), 1, w[:30], x, 1) }},
		{"MatMul stride", "stride=0 < rows=1", func() { MatMulBF16(make([]float32, 4), 0, w, x, 1) }},
		{"MatMul dst", "len(dst)=2 < (n-1)·stride+rows = 4", func() { MatMulBF16(make([]float32, 2), 2, w, x, 2) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, c.want) {
					t.Fatalf("panic %q, want it to contain %q", msg, c.want)
				}
			}()
			c.fn()
		})
	}
}

// TestDotMatchesReference checks the exported dot products (the fast path
// where available) and the pure-Go twin against the independent reference,
// for every length 0..70 and some long ones, with and without special values.
func TestDotMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{}
	for n := 0; n <= 70; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 127, 128, 129, 1000, 3584, 7168+5)
	for _, f := range formats {
		for _, special := range []bool{false, true} {
			for _, n := range lengths {
				for rep := range 4 {
					x := randX(r, n, special)
					w := randW(r, f, 1, n, rep, special)
					if !special && rep%2 == 1 {
						cancel(f, w, x)
					}
					want := refRow(f, w, x)
					if got := f.dot(w, x); !sameBits(got, want) {
						t.Fatalf("%s n=%d special=%v: exported %g (%#08x), reference %g (%#08x)",
							f.name, n, special, got, math.Float32bits(got), want, math.Float32bits(want))
					}
					if got := f.gen(w, x); !sameBits(got, want) {
						t.Fatalf("%s n=%d special=%v: generic %g, reference %g", f.name, n, special, got, want)
					}
				}
			}
		}
	}
}

func TestF32FloatMatchesF32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n <= 200; n += 7 {
		w := randX(r, n, true)
		x := randX(r, n, true)
		wb := make([]byte, 0, 4*n)
		wf := make([]float64, n)
		for i, v := range w {
			wb = binary.LittleEndian.AppendUint32(wb, math.Float32bits(v))
			wf[i] = float64(v)
		}
		want := refR16(wf, x)
		for name, got := range map[string]float32{
			"F32Float": F32Float(w, x), "generic": genericF32Float(w, x), "F32": F32(wb, x),
		} {
			if !sameBits(got, want) {
				t.Fatalf("n=%d %s = %g, reference %g", n, name, got, want)
			}
		}
	}
}

// TestReductionOrderIsVisible guards the tests themselves: on the
// cancelling data the f32-level tests use, a plain sequential sum must
// differ from R16 often, otherwise agreement with the reference would prove
// nothing about the lane tree.
func TestReductionOrderIsVisible(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	f := formats[0]
	differ := 0
	const trials = 200
	for range trials {
		n := 17 + r.IntN(100)
		x := randX(r, n, false)
		w := randW(r, f, 1, n, 0, false)
		cancel(f, w, x)
		wf := make([]float64, n)
		var seq float64
		for i := range wf {
			wf[i] = f.widen(w, i)
			seq += wf[i] * float64(x[i])
		}
		if float32(seq) != refR16(wf, x) {
			differ++
		}
	}
	t.Logf("sequential sum differs from R16 in %d/%d cases", differ, trials)
	if differ < trials/2 {
		t.Fatalf("sequential and R16 sums differ in only %d/%d cases: test data too tame", differ, trials)
	}
}

func TestMatVecMatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, f := range formats {
		for _, special := range []bool{false, true} {
			for rep := range 150 {
				rows := 1 + r.IntN(9)
				cols := 1 + r.IntN(70)
				if rep%10 == 0 {
					cols = 16 * (1 + r.IntN(8))
				}
				x := randX(r, cols, special)
				w := randW(r, f, rows, cols, r.IntN(4), special)
				dst := make([]float32, rows)
				f.matVec(dst, w, x)
				for row := range rows {
					wr := w[row*cols*f.size : (row+1)*cols*f.size]
					want := refRow(f, wr, x)
					if !sameBits(dst[row], want) {
						t.Fatalf("%s rows=%d cols=%d row %d: MatVec %g, reference %g", f.name, rows, cols, row, dst[row], want)
					}
					if got := f.dot(wr, x); !sameBits(got, dst[row]) {
						t.Fatalf("%s rows=%d cols=%d row %d: MatVec %g, dot %g", f.name, rows, cols, row, dst[row], got)
					}
				}
			}
		}
	}
}

func TestMatMulMatchesMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const sentinel = float32(-12345.5)
	for _, f := range formats {
		for _, special := range []bool{false, true} {
			for rep := range 80 {
				n := 1 + r.IntN(17)
				rows := 1 + r.IntN(9)
				cols := 1 + r.IntN(70)
				if rep%8 == 0 {
					cols = 16 * (1 + r.IntN(6))
				}
				stride := rows + r.IntN(3)
				x := randX(r, n*cols, special)
				w := randW(r, f, rows, cols, r.IntN(4), special)
				if !special {
					rb := cols * f.size
					for tt := range n {
						row := tt % rows
						cancel(f, w[row*rb:(row+1)*rb], x[tt*cols:(tt+1)*cols])
					}
				}
				dst := make([]float32, (n-1)*stride+rows+2)
				for i := range dst {
					dst[i] = sentinel
				}
				f.matMul(dst, stride, w, x, n)
				want := make([]float32, rows)
				for tt := range n {
					f.matVec(want, w, x[tt*cols:(tt+1)*cols])
					for row := range stride {
						got := dst[tt*stride+row]
						if row >= rows {
							if got != sentinel && tt < n-1 {
								t.Fatalf("%s: MatMul wrote the gap dst[%d]", f.name, tt*stride+row)
							}
							continue
						}
						if !sameBits(got, want[row]) {
							t.Fatalf("%s n=%d rows=%d cols=%d t=%d row=%d: MatMul %g, MatVec %g",
								f.name, n, rows, cols, tt, row, got, want[row])
						}
					}
				}
				for _, v := range dst[(n-1)*stride+rows:] {
					if v != sentinel {
						t.Fatalf("%s: MatMul wrote past the last row", f.name)
					}
				}
			}
		}
	}
}

// TestMatMulLarge crosses the row-block boundary of the batched driver.
func TestMatMulLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, f := range formats {
		rows, cols, n := 70, 1037, 5
		x := randX(r, n*cols, false)
		w := randW(r, f, rows, cols, 1, false)
		dst := make([]float32, n*rows)
		f.matMul(dst, rows, w, x, n)
		for tt := range n {
			for row := range rows {
				want := refRow(f, w[row*cols*f.size:(row+1)*cols*f.size], x[tt*cols:(tt+1)*cols])
				if !sameBits(dst[tt*rows+row], want) {
					t.Fatalf("%s t=%d row=%d: %g, reference %g", f.name, tt, row, dst[tt*rows+row], want)
				}
			}
		}
	}
}

// TestF32FloatAliasing makes sure the reinterpretation used by the amd64
// F32Float matches a byte-encoded copy even for a sub-slice at an odd
// element offset.
func TestF32FloatAliasing(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	all := randX(r, 101, false)
	w, x := all[3:83], randX(r, 80, false)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))
	enc := make([]byte, 0, len(b))
	for _, v := range w {
		enc = binary.LittleEndian.AppendUint32(enc, math.Float32bits(v))
	}
	if got, want := F32Float(w, x), F32(enc, x); !sameBits(got, want) {
		t.Fatalf("F32Float %g, F32 %g", got, want)
	}
	_ = b
}
