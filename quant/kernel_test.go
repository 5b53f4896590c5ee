package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/floatbits"
	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
)

// quantized builds a matrix of format c from random weights via Quantize.
func quantized(t testing.TB, rng *rand.Rand, c fmtCase, rows, cols int) (Matrix, []byte, []byte) {
	t.Helper()
	w := randFloats(rng, rows*cols)
	wb, sb, err := Quantize(c.f, w, rows, cols, c.gs)
	if err != nil {
		t.Fatalf("Quantize %v [%d,%d]: %v", c, rows, cols, err)
	}
	m, err := New(c.f, rows, cols, c.gs, wb, sb)
	if err != nil {
		t.Fatalf("New %v [%d,%d]: %v", c, rows, cols, err)
	}
	return m, wb, sb
}

// randomBytesMatrix builds a matrix of format c from random codes (every
// code, including −8 nibbles and fp8 NaN, occurs) and random positive scales.
func randomBytesMatrix(t testing.TB, rng *rand.Rand, c fmtCase, rows, cols int, nan bool) (Matrix, []byte, []byte) {
	t.Helper()
	nw, _ := WeightBytes(c.f, rows, cols, c.gs)
	ns, _ := ScaleBytes(c.f, rows, cols, c.gs)
	wb := testkit.RandomBytes(rng, int(nw))
	sb := make([]byte, ns)
	switch c.f {
	case F32, BF16, F16:
		// Random bit patterns include NaN/Inf; re-encode finite values.
		w := randFloats(rng, rows*cols)
		wb, _, _ = Quantize(c.f, w, rows, cols, 0)
	case MXFP4:
		for i := range sb {
			sb[i] = byte(110 + rng.IntN(25))
			if nan && rng.IntN(7) == 0 {
				sb[i] = 255
			}
		}
	default:
		for i := 0; i < len(sb); i += 4 {
			binary.LittleEndian.PutUint32(sb[i:], math.Float32bits(float32(rng.Float64()+0.01)*0.37))
		}
		if c.f == FP8E4M3B128 && !nan {
			for i, b := range wb {
				if b&0x7f == 0x7f {
					wb[i] = 0x3c
				}
			}
		}
	}
	m, err := New(c.f, rows, cols, c.gs, wb, sb)
	if err != nil {
		t.Fatalf("New %v [%d,%d]: %v", c, rows, cols, err)
	}
	return m, wb, sb
}

func TestMatVecMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range allCases() {
		for _, sh := range shapes(c.f) {
			rows, cols := sh[0], sh[1]
			for _, src := range []string{"quantized", "random", "spiked", "groupspiked"} {
				t.Run(fmt.Sprintf("%v/%dx%d/%s", c, rows, cols, src), func(t *testing.T) {
					var m Matrix
					var wb, sb []byte
					if src == "quantized" || src == "groupspiked" {
						m, wb, sb = quantized(t, rng, c, rows, cols)
					} else {
						m, wb, sb = randomBytesMatrix(t, rng, c, rows, cols, false)
					}
					x := wideFloats(rng, cols)
					switch src {
					case "spiked":
						plantSpikes(c.f, rows, cols, wb, x)
					case "groupspiked":
						x = randFloats(rng, cols)
						g := c.gs
						if c.f == FP8E4M3B128 {
							g = FP8Block
						}
						plantGroupSpikes(c.f, rows, cols, g, wb, sb, x)
					}
					want := refMatVec(c.f, rows, cols, c.gs, wb, sb, x)
					got := make([]float32, rows)
					m.MatVec(got, x)
					testkit.RequireSameBitsOrNaN(t, "MatVec", got, want)
					pureOf(m).MatVec(got, x)
					testkit.RequireSameBitsOrNaN(t, "pure MatVec", got, want)
				})
			}
		}
	}
}

// pureOf returns m with its pure-Go kernels forced (m itself when the format
// has no SIMD path in this package).
func pureOf(m Matrix) Matrix {
	switch v := m.(type) {
	case *intRow:
		c := *v
		c.pure = true
		return &c
	case *int4Grouped:
		c := *v
		c.pure = true
		return &c
	case *fp8:
		c := *v
		c.pure = true
		return &c
	}
	return m
}

func TestMatMulEqualsMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range allCases() {
		sh := shapes(c.f)
		for _, s := range []int{0, len(sh) / 2, len(sh) - 1} {
			rows, cols := sh[s][0], sh[s][1]
			m, _, _ := randomBytesMatrix(t, rng, c, rows, cols, true)
			for n := 1; n <= 17; n++ {
				stride := rows + n%3
				x := wideFloats(rng, n*cols)
				dst := make([]float32, (n-1)*stride+rows)
				for i := range dst {
					dst[i] = -7 // sentinel for the gaps between rows
				}
				m.MatMul(dst, stride, x, n)
				one := make([]float32, rows)
				for tk := range n {
					m.MatVec(one, x[tk*cols:(tk+1)*cols])
					testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v [%d,%d] n=%d t=%d", c, rows, cols, n, tk), dst[tk*stride:tk*stride+rows], one)
					for g := tk*stride + rows; g < min(len(dst), (tk+1)*stride); g++ {
						if dst[g] != -7 {
							t.Fatalf("%v: MatMul wrote the gap element %d", c, g)
						}
					}
				}
				for _, w := range []int{2, 3, 5} {
					par := make([]float32, len(dst))
					MatMulParallel(m, par, stride, x, n, w)
					for tk := range n {
						testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v MatMulParallel w=%d", c, w), par[tk*stride:tk*stride+rows], dst[tk*stride:tk*stride+rows])
					}
					// These matrices are below the work threshold, so force
					// the split as well.
					clear(par)
					matMulChunks(m, par, stride, x, n, w, 1)
					for tk := range n {
						testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v matMulChunks w=%d grain=1", c, w), par[tk*stride:tk*stride+rows], dst[tk*stride:tk*stride+rows])
					}
				}
			}
		}
	}
}

// TestRowGrain pins the work-based chunking: a chunk holds at least
// parallel.MinWork multiply-adds and minRowGrain rows.
func TestRowGrain(t *testing.T) {
	for _, tc := range []struct{ work, want int }{
		{0, minRowGrain}, {1, parallel.MinWork}, {128, parallel.MinWork / 128}, {parallel.MinWork, minRowGrain},
		{parallel.MinWork/16 + 1, minRowGrain}, {7168, (parallel.MinWork + 7167) / 7168},
	} {
		if tc.want < minRowGrain {
			tc.want = minRowGrain
		}
		if got := rowGrain(tc.work); got != tc.want {
			t.Errorf("rowGrain(%d) = %d, want %d", tc.work, got, tc.want)
		}
		if g := rowGrain(tc.work); tc.work > 0 && g*tc.work < parallel.MinWork {
			t.Errorf("rowGrain(%d) = %d rows: only %d multiply-adds", tc.work, g, g*tc.work)
		}
	}
	// The fixture models' matrices (hidden 128, at most 512 rows) run inline.
	if k := parallel.Chunks(512, 2, rowGrain(128)); k != 1 {
		t.Errorf("512×128 mat-vec split into %d chunks", k)
	}
	// A K3 expert projection (3072×7168) still uses both workers.
	if k := parallel.Chunks(3072, 2, rowGrain(7168)); k != 2 {
		t.Errorf("3072×7168 mat-vec split into %d chunks, want 2", k)
	}
}

func TestParallelAndSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range allCases() {
		rows, cols := 300, 160
		m, _, _ := randomBytesMatrix(t, rng, c, rows, cols, true)
		x := randFloats(rng, cols)
		want := make([]float32, rows)
		m.MatVec(want, x)
		for _, w := range []int{0, 1, 2, 3, 8} {
			got := make([]float32, rows)
			MatVecParallel(m, got, x, w)
			testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v workers=%d", c, w), got, want)
			// 300×160 is below the work threshold: force uneven splits too.
			for _, g := range []int{1, 16, 100} {
				clear(got)
				matVecChunks(m, got, x, w, g)
				testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v workers=%d grain=%d", c, w, g), got, want)
			}
		}
		for _, r := range [][2]int{{0, 0}, {0, 1}, {127, 129}, {128, 300}, {299, 300}, {5, 260}} {
			s := m.Slice(r[0], r[1])
			if s.Rows() != r[1]-r[0] || s.Cols() != cols || s.Format() != c.f {
				t.Fatalf("%v Slice%v: shape [%d,%d] %v", c, r, s.Rows(), s.Cols(), s.Format())
			}
			got := make([]float32, s.Rows())
			s.MatVec(got, x)
			testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v Slice%v", c, r), got, want[r[0]:r[1]])
			// Nested slices keep global row indices (fp8 scale rows).
			if s.Rows() > 2 {
				ss := s.Slice(1, s.Rows())
				got2 := make([]float32, ss.Rows())
				ss.MatVec(got2, x)
				testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v nested Slice%v", c, r), got2, want[r[0]+1:r[1]])
			}
		}
	}
}

func TestDecodeRowAndDequantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range allCases() {
		rows, cols := 131, 96
		m, wb, sb := randomBytesMatrix(t, rng, c, rows, cols, true)
		got := make([]float32, rows*cols)
		if err := Dequantize(got, m); err != nil {
			t.Fatal(err)
		}
		// Independent: decode element (r, i) as the reference kernel does,
		// times its scale, rounded once.
		want := make([]float32, rows*cols)
		for r := range rows {
			for i := range cols {
				want[r*cols+i] = refElement(c, rows, cols, wb, sb, r, i)
			}
		}
		testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v Dequantize", c), got, want)
		// Rows of a slice decode like the full matrix.
		s := m.Slice(129, 131).(RowDecoder)
		row := make([]float32, cols)
		s.DecodeRow(row, 1)
		testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%v sliced DecodeRow", c), row, want[130*cols:131*cols])
	}
}

func refElement(c fmtCase, rows, cols int, wb, sb []byte, r, i int) float32 {
	switch c.f {
	case F32:
		return float32(le32(wb, r*cols+i))
	case BF16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(wb[2*(r*cols+i):])) << 16)
	case F16:
		return refF16(binary.LittleEndian.Uint16(wb[2*(r*cols+i):]))
	case Int8Row:
		return float32(float64(int8(wb[r*cols+i])) * le32(sb, r))
	case Int4Row:
		return float32(refNib(wb[r*((cols+1)/2):], i) * le32(sb, r))
	case Int4Grouped:
		ng := (cols + c.gs - 1) / c.gs
		return float32(refNib(wb[r*((cols+1)/2):], i) * le32(sb, r*ng+i/c.gs))
	case FP8E4M3B128:
		return float32(float64(refFP8(wb[r*cols+i])) * le32(sb, (r/128)*((cols+127)/128)+i/128))
	case MXFP4:
		s := sb[r*cols/32+i/32]
		if s == 255 {
			return 0
		}
		return float32(refMX(wb[r*cols/2:], i) * math.Ldexp(1, int(s)-127))
	}
	panic("refElement")
}

func TestFP8TableAllCodes(t *testing.T) {
	for b := range 256 {
		got, want := FP8E4M3(byte(b)), refFP8(byte(b))
		if b&0x7f == 0x7f {
			if got == got {
				t.Errorf("code %#02x = %v, want NaN", b, got)
			}
			continue
		}
		if got != got || math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("code %#02x = %v (%#08x), want %v (%#08x)", b, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	// Landmarks from the OCP definition.
	for _, c := range []struct {
		b byte
		v float32
	}{{0x7E, 448}, {0xFE, -448}, {0x01, 1.0 / 512}, {0x08, 1.0 / 64}, {0x38, 1}, {0x80, float32(math.Copysign(0, -1))}} {
		if got := FP8E4M3(c.b); math.Float32bits(got) != math.Float32bits(c.v) {
			t.Errorf("code %#02x = %v, want %v", c.b, got, c.v)
		}
	}
}

func TestEncodeFP8(t *testing.T) {
	for b := range 256 {
		if b&0x7f == 0x7f {
			continue
		}
		v := float64(refFP8(byte(b)))
		want := byte(b)
		if b == 0x80 {
			want = 0 // −0 encodes as +0
		}
		if got := EncodeFP8E4M3(v); got != want {
			t.Errorf("Encode(%v) = %#02x, want %#02x", v, got, want)
		}
		// Midpoint to the next code: ties go to the even code.
		if b&0x7f < 0x7e {
			next := float64(refFP8(byte(b + 1)))
			mid := (v + next) / 2
			even := byte(b)
			if b&1 != 0 {
				even = byte(b + 1)
			}
			if even == 0x80 {
				even = 0
			}
			if got := EncodeFP8E4M3(mid); got != even {
				t.Errorf("Encode(midpoint %v of %#02x,%#02x) = %#02x, want %#02x", mid, b, b+1, got, even)
			}
		}
	}
	if EncodeFP8E4M3(1e9) != 0x7E || EncodeFP8E4M3(-1e9) != 0xFE || EncodeFP8E4M3(math.NaN()) != 0x7F {
		t.Error("saturation or NaN encoding wrong")
	}
}

func TestFP8NaNStaysInItsRow(t *testing.T) {
	rows, cols := 3, 200
	q := make([]byte, rows*cols)
	for i := range q {
		q[i] = 0x38 // 1.0
	}
	q[cols+150] = 0x7F
	sc := make([]byte, 8)
	binary.LittleEndian.PutUint32(sc, math.Float32bits(0.5))
	binary.LittleEndian.PutUint32(sc[4:], math.Float32bits(2))
	m, err := NewFP8E4M3B128(rows, cols, q, sc)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = 1
	}
	y := make([]float32, rows)
	m.MatVec(y, x)
	// 128·1·0.5 + 72·1·2 = 208 for the clean rows.
	if y[0] != 208 || y[2] != 208 || y[1] == y[1] {
		t.Fatalf("y = %v, want [208 NaN 208]", y)
	}
}

func TestQuantizerProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	rows, cols := 37, 301
	w := randFloats(rng, rows*cols)
	w[5] = 0
	q8, s8, err := QuantizeInt8Row(w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	for r := range rows {
		var amax float64
		for _, v := range w[r*cols : (r+1)*cols] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		if s := le32(s8, r); s != float64(float32(amax)/127) {
			t.Fatalf("int8 row %d scale %v, want amax/127 = %v", r, s, float32(amax)/127)
		}
		for i := range cols {
			qv := int8(q8[r*cols+i])
			if qv == -128 {
				t.Fatal("int8 code −128 emitted")
			}
			if d := math.Abs(float64(w[r*cols+i]) - float64(qv)*le32(s8, r)); d > le32(s8, r)*0.5000001 {
				t.Fatalf("int8 error %v > scale/2", d)
			}
		}
	}
	q4, s4, err := QuantizeInt4Row(w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	for r := range rows {
		rb := (cols + 1) / 2
		for i := range cols {
			if refNib(q4[r*rb:], i) == -8 {
				t.Fatal("int4 value −8 emitted")
			}
			if d := math.Abs(float64(w[r*cols+i]) - refNib(q4[r*rb:], i)*le32(s4, r)); d > le32(s4, r)*0.5000001 {
				t.Fatalf("int4 error %v > scale/2", d)
			}
		}
		if q4[r*rb+rb-1]>>4 != 8 {
			t.Fatal("odd-width padding nibble is not 8")
		}
	}
	// Round half to even: 2.5·s → 2, 3.5·s → 4, −2.5·s → −2.
	row := []float32{7, 2.5, 3.5, -2.5, 0.5, -0.5, 1.5}
	qh, _, _ := QuantizeInt4Row(row, 1, len(row))
	want := []float64{7, 2, 4, -2, 0, 0, 2}
	for i, v := range want {
		if got := refNib(qh, i); got != v {
			t.Errorf("round-half-even element %d = %v, want %v", i, got, v)
		}
	}
	// All-zero rows get the 1e−8 floor and zero codes.
	_, sz, _ := QuantizeInt4Grouped(make([]float32, 40), 1, 40, 16)
	for g := range 3 {
		if le32(sz, g) != float64(float32(1e-8)) {
			t.Fatalf("zero group scale %v, want 1e−8", le32(sz, g))
		}
	}
	// fp8: the block maximum lands on ±448.
	qf, sf, err := QuantizeFP8E4M3B128(w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range qf {
		if b&0x7f == 0x7f {
			t.Fatal("fp8 quantizer emitted NaN")
		}
		found = found || b&0x7f == 0x7e
	}
	if !found || len(sf) != 4*3 {
		t.Fatalf("fp8 quantizer: max code present %v, scale bytes %d", found, len(sf))
	}
	// Non-finite input is refused.
	bad := []float32{1, float32(math.Inf(1))}
	for _, f := range []Format{Int8Row, Int4Row, FP8E4M3B128} {
		if _, _, err := Quantize(f, bad, 1, 2, 0); !errors.Is(err, ErrNonFinite) {
			t.Errorf("%v: Quantize(+Inf) err = %v", f, err)
		}
	}
	if _, _, err := Quantize(Int4Grouped, w, rows, cols, 24); !errors.Is(err, ErrGroupSize) {
		t.Errorf("gs 24: err = %v", err)
	}
	if _, _, err := Quantize(Int2Row, w, rows, cols, 0); !errors.Is(err, ErrNotImplemented) {
		t.Errorf("int2-row: err = %v", err)
	}
}

func TestPlainEncoders(t *testing.T) {
	// Every binary16 pattern widens and narrows back to itself (NaN stays NaN).
	for h := range 1 << 16 {
		v := F16ToF32(uint16(h))
		if w := refF16(uint16(h)); v != v || w != w {
			if v == v || w == w {
				t.Fatalf("f16 %#04x: %v vs %v", h, v, w)
			}
			continue
		} else if math.Float32bits(v) != math.Float32bits(w) && !(v == 0 && w == 0 && math.Signbit(float64(v)) == (h&0x8000 != 0)) {
			t.Fatalf("f16 %#04x widens to %v, want %v", h, v, w)
		}
		if back := F32ToF16(v); back != uint16(h) {
			t.Fatalf("f16 %#04x round-trips to %#04x", h, back)
		}
	}
	// Narrowing rounds to nearest even; ties between 1 and 1+2^−10.
	if F32ToF16(1+1.0/2048) != 0x3c00 || F32ToF16(1+3.0/2048) != 0x3c02 || F32ToF16(65520) != 0x7c00 || F32ToF16(65519) != 0x7bff {
		t.Error("f16 rounding wrong")
	}
	if F32ToBF16(1+1.0/256) != 0x3f80 || F32ToBF16(1+3.0/256) != 0x3f82 {
		t.Error("bf16 rounding wrong")
	}
}

func TestConstructorsRefuseBadSizes(t *testing.T) {
	for _, c := range allCases() {
		rows, cols := 3, 64
		nw, _ := WeightBytes(c.f, rows, cols, c.gs)
		ns, _ := ScaleBytes(c.f, rows, cols, c.gs)
		if _, err := New(c.f, rows, cols, c.gs, make([]byte, nw), make([]byte, ns)); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if _, err := New(c.f, rows, cols, c.gs, make([]byte, nw+1), make([]byte, ns)); err == nil {
			t.Errorf("%v: long weight accepted", c)
		}
		if ns > 0 {
			if _, err := New(c.f, rows, cols, c.gs, make([]byte, nw), make([]byte, ns-1)); err == nil {
				t.Errorf("%v: short scales accepted", c)
			}
		} else if _, err := New(c.f, rows, cols, c.gs, make([]byte, nw), make([]byte, 4)); !errors.Is(err, ErrScaleSize) {
			t.Errorf("%v: scales on a plain format: %v", c, err)
		}
		if _, err := New(c.f, -1, cols, c.gs, nil, nil); err == nil {
			t.Errorf("%v: negative rows accepted", c)
		}
	}
	if _, err := NewMXFP4(2, 48, make([]byte, 48), make([]byte, 3)); err == nil {
		t.Error("mxfp4 with cols % 32 != 0 accepted")
	}
	if _, err := NewInt4Grouped(2, 48, 40, make([]byte, 48), make([]byte, 16)); !errors.Is(err, ErrGroupSize) {
		t.Errorf("gs 40: %v", err)
	}
	for _, f := range []Format{Int2Row, Int3G64, E8IQ3Lattice, MXFP4CFS1, Format(99)} {
		if _, err := New(f, 1, 64, 0, nil, nil); err == nil {
			t.Errorf("%v accepted by New", f)
		}
	}
	if _, err := F32FromFloats(2, 3, make([]float32, 5)); !errors.Is(err, ErrShape) {
		t.Errorf("F32FromFloats short: %v", err)
	}
}

// TestKernelsUnrounded compares the float64 sums of the integer and fp8
// kernels (before any float32 rounding) with the reference, for both the
// dispatched and the pure-Go kernels.
func TestKernelsUnrounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 128, 129, 255, 1000} {
		x := wideFloats(rng, n)
		q8 := testkit.RandomBytes(rng, n)
		q4 := testkit.RandomBytes(rng, (n+1)/2)
		v8, v4, vf := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range n {
			v8[i] = float64(int8(q8[i]))
			v4[i] = refNib(q4, i)
			c := q8[i]
			if c&0x7f == 0x7f {
				c = 0x42
			}
			vf[i] = float64(refFP8(c))
		}
		qf := make([]byte, n)
		for i := range n {
			qf[i] = q8[i]
			if qf[i]&0x7f == 0x7f {
				qf[i] = 0x42
			}
		}
		one := func(int) float64 { return 1 }
		check := func(name string, got, want float64) {
			t.Helper()
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%s n=%d: %v, want %v", name, n, got, want)
			}
		}
		xw := floatbits.Widen64(nil, x)
		check("r16Int8", r16Int8(q8, xw), testkit.RefR16(v8, x))
		check("r16Int8Go", r16Int8Go(q8, xw), testkit.RefR16(v8, x))
		check("r16Int4", r16Int4(q4, xw), testkit.RefR16(v4, x))
		check("r16Int4Go", r16Int4Go(q4, xw), testkit.RefR16(v4, x))
		// A single RG group of length n with scale 1 is its sub-sum.
		if n > 0 {
			check("subInt4Go", subInt4Go(q4, xw), float64(refRGsub(v4, x, one)))
			check("subFP8Go", subFP8Go(qf, xw), float64(refRGsub(vf, x, one)))
		}
	}
}

// refRGsub is the unrounded sub-sum of one group spanning all of x.
func refRGsub(w []float64, x []float32, _ func(int) float64) float64 {
	var s [8]float64
	m := 8 * (len(x) / 8)
	for j := 0; j < m; j++ {
		s[j%8] += w[j] * float64(x[j])
	}
	sub := ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))
	for j := m; j < len(x); j++ {
		sub += w[j] * float64(x[j])
	}
	return sub
}

func TestScanStats(t *testing.T) {
	packed := make([]byte, 2*64/2)
	scales := []byte{127, 255, 255, 3}
	m, err := NewMXFP4(2, 64, packed, scales)
	if err != nil {
		t.Fatal(err)
	}
	if s := ScanStats(m); s.NaNScaleGroups != 2 {
		t.Fatalf("NaNScaleGroups = %d, want 2", s.NaNScaleGroups)
	}
	if s := ScanStats(m.Slice(1, 2)); s.NaNScaleGroups != 1 {
		t.Fatalf("slice NaNScaleGroups = %d, want 1", s.NaNScaleGroups)
	}
	f, _ := F32FromFloats(1, 1, []float32{1})
	if ScanStats(f).NaNScaleGroups != 0 {
		t.Fatal("f32 stats")
	}
}
