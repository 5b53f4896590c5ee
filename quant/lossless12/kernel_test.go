package lossless12

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/dot"
	"github.com/k3-project/k3/internal/testkit"
)

// r16 is the R16 reduction of §5.2 written out plainly, the reference both
// the bf16 kernel and this package's kernels must equal.
func r16(w []byte, x []float32) float32 {
	wf := make([]float64, len(x))
	for i := range wf {
		wf[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(w[2*i:])) << 16))
	}
	return float32(testkit.RefR16(wf, x))
}

// cancelling draws a [rows, cols] bf16 matrix and n activation rows for
// which the R16 result depends on every detail of the reduction: x is
// constant over each 16-element stripe, and each stripe holds up to three
// huge weights (2^30–2^40 times the rest, so the float64 lane sums round
// away bits the float32 result keeps) each with its negation in another
// lane, so the huge terms cancel only where the tree combines those lanes
// and the small terms survive or not depending on the order.
// One weight in forty is tiny or zero and escapes its window, and so do
// the small weights of a block that holds a huge one.
func cancelling(r *rand.Rand, rows, cols, n int) ([]byte, []float32) {
	m := cols &^ 15
	codes := make([]uint16, rows*cols)
	for i := range codes {
		codes[i] = uint16(math.Float32bits(float32(r.NormFloat64()*0.02)) >> 16)
		switch r.IntN(40) {
		case 0:
			codes[i] &= 0x807F // exponent 0: ±0 or a subnormal
		case 1:
			codes[i] = codes[i]&0x807F | uint16(60+r.IntN(40))<<7
		}
	}
	for row := range rows {
		w := codes[row*cols : (row+1)*cols]
		for s := 0; s < m; s += 16 {
			for range 3 {
				i, j := s+r.IntN(16), s+r.IntN(16)
				if i != j {
					w[i] = uint16(r.IntN(2))<<15 | uint16(157+r.IntN(11))<<7 | uint16(r.IntN(128))
					w[j] = w[i] ^ 0x8000
				}
			}
		}
	}
	x := make([]float32, n*cols)
	for t := range n {
		xt := x[t*cols : (t+1)*cols]
		for i := range xt {
			if i < m && i%16 > 0 {
				xt[i] = xt[i-1]
				continue
			}
			xt[i] = float32(r.NormFloat64())
		}
	}
	return bf16Bytes(codes), x
}

// cancellingX draws a [rows, cols] bf16 matrix of Gaussian weights, whose
// blocks rarely escape, and n activation rows that make the R16 result
// depend on the lane map and the tree through the activations instead:
// every third 16-column stripe has one activation of 2^30 (random sign)
// across it and its sixteen weights in eight pairs (w, −w) over random
// lanes, so huge lane sums cancel only in the tree and the small terms of
// the other stripes survive or not depending on the order.
func cancellingX(r *rand.Rand, rows, cols, n int) ([]byte, []float32) {
	m := cols &^ 15
	codes := make([]uint16, rows*cols)
	for i := range codes {
		codes[i] = uint16(math.Float32bits(float32(r.NormFloat64()*0.02)) >> 16)
	}
	for row := range rows {
		w := codes[row*cols : (row+1)*cols]
		for s := 0; s < m; s += 48 {
			p := r.Perm(16)
			for k := 0; k < 16; k += 2 {
				w[s+p[k+1]] = w[s+p[k]] ^ 0x8000
			}
		}
	}
	x := make([]float32, n*cols)
	for t := range n {
		xt := x[t*cols : (t+1)*cols]
		for i := range xt {
			switch {
			case i < m && i%48 == 0:
				xt[i] = float32(math.Ldexp(1, 30)) * float32(1-2*r.IntN(2))
			case i < m && i%48 < 16:
				xt[i] = xt[i-1]
			default:
				xt[i] = float32(r.NormFloat64())
			}
		}
	}
	return bf16Bytes(codes), x
}

func TestKernelsMatchBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, cols := range []int{1, 15, 16, 17, 64, 100, 333, 1000} {
		for _, rows := range []int{1, 5, 37} {
			for gi, gen := range []func(*rand.Rand, int, int, int) ([]byte, []float32){cancelling, cancellingX} {
				w, x := gen(r, rows, cols, 1)
				name := fmt.Sprintf("[%d,%d]/%d", rows, cols, gi)
				m := mustOpen(t, rows, cols, w)
				want := make([]float32, rows)
				dot.MatVecBF16(want, w, x)
				for i := range rows {
					if ref := r16(w[2*i*cols:2*(i+1)*cols], x); math.Float32bits(ref) != math.Float32bits(want[i]) {
						t.Fatalf("%s row %d: the bf16 kernel gives %g, R16 %g", name, i, want[i], ref)
					}
				}
				got := make([]float32, rows)
				m.MatVec(got, x)
				testkit.RequireSameBits(t, name+" MatVec", got, want)
				pureGo(m).MatVec(got, x)
				testkit.RequireSameBits(t, name+" MatVec, pure Go", got, want)
				for lo := 0; lo <= rows; lo += max(1, rows/3) {
					for hi := lo; hi <= rows; hi += max(1, rows/4) {
						part := make([]float32, hi-lo)
						m.Slice(lo, hi).MatVec(part, x)
						testkit.RequireSameBits(t, fmt.Sprintf("%s Slice(%d,%d)", name, lo, hi), part, want[lo:hi])
						clear(part)
						m.MatVecRows(part, x, lo, hi)
						testkit.RequireSameBits(t, fmt.Sprintf("%s MatVecRows(%d,%d)", name, lo, hi), part, want[lo:hi])
					}
				}
				for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 31, 32, 33} {
					_, xs := gen(r, 0, cols, n)
					stride := rows + 3
					wantN := make([]float32, n*stride)
					gotN := make([]float32, n*stride)
					for i := range gotN {
						gotN[i], wantN[i] = -7, -7
					}
					dot.MatMulBF16(wantN, stride, w, xs, n)
					m.MatMul(gotN, stride, xs, n)
					testkit.RequireSameBits(t, fmt.Sprintf("%s MatMul n=%d", name, n), gotN, wantN)
					lo, hi := rows/3, rows-rows/4
					part := make([]float32, n*stride)
					m.MatMulRows(part, stride, xs, n, lo, hi)
					for ti := range n {
						testkit.RequireSameBits(t, fmt.Sprintf("%s MatMulRows(%d,%d) n=%d", name, lo, hi, n),
							part[ti*stride:ti*stride+hi-lo], gotN[ti*stride+lo:ti*stride+hi])
					}
					for ti := range n {
						one := make([]float32, rows)
						m.MatVec(one, xs[ti*cols:(ti+1)*cols])
						testkit.RequireSameBits(t, fmt.Sprintf("%s MatMul n=%d row %d", name, n, ti), gotN[ti*stride:ti*stride+rows], one)
					}
				}
			}
		}
	}
}

// TestKernelsChunked runs a matrix taller than one decode chunk, so the
// kernels cross chunk boundaries inside a call.
func TestKernelsChunked(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	rows, cols := 300, 1000 // 131 rows per 256 KiB chunk
	w, x := cancelling(r, rows, cols, 3)
	enc, _ := Encode(rows, cols, w)
	m, err := Open(enc)
	if err != nil {
		t.Fatal(err)
	}
	if m.chunkRows() >= rows {
		t.Fatalf("chunk of %d rows covers the matrix", m.chunkRows())
	}
	want, got := make([]float32, 3*rows), make([]float32, 3*rows)
	dot.MatMulBF16(want, rows, w, x, 3)
	m.MatMul(got, rows, x, 3)
	testkit.RequireSameBits(t, "MatMul", got, want)
	m.MatVec(got[:rows], x[:cols])
	testkit.RequireSameBits(t, "MatVec", got[:rows], want[:rows])
}

// BenchmarkMatVec compares a mat-vec over a K3-wide matrix (2048 × 7168,
// 29 MB in bf16, beyond the caches) in bf16 and in lossless12; bytes/s is
// of the bf16 size in both, so the figures compare as weights per second.
func BenchmarkMatVec(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 2048, 7168
	w := gaussianBF16(r, rows, cols, 0.02)
	m := mustOpen(b, rows, cols, w)
	x := testkit.Gaussian(r, cols, 1)
	dst := make([]float32, rows)
	b.Run("bf16", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for b.Loop() {
			dot.MatVecBF16(dst, w, x)
		}
	})
	b.Run("lossless12", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for b.Loop() {
			m.MatVec(dst, x)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		row := make([]byte, 2*cols)
		for b.Loop() {
			for i := range rows {
				m.decodeRow(row, i)
			}
		}
	})
}
