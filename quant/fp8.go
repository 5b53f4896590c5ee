package quant

import (
	"github.com/k3-project/k3/internal/kernels/f64pool"
	"github.com/k3-project/k3/internal/kernels/floatbits"
)

// fp8f32 and fp8f64 map each OCP E4M3-FN byte to its value (§6.4). They
// are constant tables computed once during package initialisation, never
// lazily, so concurrent kernels only ever read them.
var (
	fp8f32 = buildFP8Table()
	fp8f64 = widenTable(&fp8f32)
)

func buildFP8Table() (t [256]float32) {
	for b := range t {
		t[b] = floatbits.E4M3(byte(b))
	}
	return t
}

func widenTable(t *[256]float32) (w [256]float64) {
	for i, v := range t {
		w[i] = float64(v)
	}
	return w
}

// FP8E4M3 returns the value of an OCP E4M3-FN byte: bit 7 sign, bits 6–3
// exponent (bias 7), bits 2–0 mantissa; 0x7F and 0xFF are NaN, there are no
// infinities, and ±0 keep their sign.
func FP8E4M3(b byte) float32 { return fp8f32[b] }

// fp8 is an fp8-e4m3-b128 matrix: E4M3 bytes [O, I] with F32 scales on a
// row-major [⌈O/128⌉, ⌈I/128⌉] grid; RG with g = 128 along the row,
// acc += sub·f64(scale[o/128][g]).
type fp8 struct {
	rows, cols int
	row0       int    // index of row 0 in the full matrix (the scale grid is global)
	nbc        int    // scale blocks per grid row, ⌈I/128⌉
	q          []byte // rows·cols bytes
	scales     []byte // the whole grid, 4·⌈O/128⌉·nbc bytes
	pure       bool
}

// NewFP8E4M3B128 wraps fp8-e4m3-b128 weights (rows·cols E4M3 bytes) and their
// little-endian F32 block scales (4·⌈rows/128⌉·⌈cols/128⌉ bytes, row-major).
// UE8M0 (one-byte) block scales are not implemented: pass them and the scale
// length check refuses them.
func NewFP8E4M3B128(rows, cols int, q, scales []byte) (Matrix, error) {
	if err := checkBuffers(FP8E4M3B128, rows, cols, 0, q, scales); err != nil {
		return nil, err
	}
	return &fp8{rows: rows, cols: cols, nbc: (cols + FP8Block - 1) / FP8Block,
		q: q[:len(q):len(q)], scales: scales[:len(scales):len(scales)]}, nil
}

func (m *fp8) Format() Format { return FP8E4M3B128 }
func (m *fp8) Rows() int      { return m.rows }
func (m *fp8) Cols() int      { return m.cols }

func (m *fp8) row(r int, x []float64) float32 {
	q := m.q[r*m.cols : (r+1)*m.cols]
	b := (m.row0 + r) / FP8Block
	sc := m.scales[4*b*m.nbc : 4*(b+1)*m.nbc]
	if m.pure {
		return float32(rgFP8RowGo(q, x, sc))
	}
	return float32(rgFP8Row(q, x, sc))
}

func (m *fp8) MatVec(dst, x []float32) {
	checkMatVec(FP8E4M3B128, "MatVec", m.rows, m.cols, len(dst), len(x))
	sp := f64pool.Get(len(x))
	xw := floatbits.Widen64(*sp, x)
	for r := range dst {
		dst[r] = m.row(r, xw)
	}
	f64pool.Put(sp)
}

func (m *fp8) MatMul(dst []float32, stride int, x []float32, n int) {
	checkMatMul(FP8E4M3B128, "MatMul", m.rows, m.cols, len(dst), stride, len(x), n)
	rowMatMul(m.rows, m.cols, dst, stride, x, n, m.row)
}

func (m *fp8) Slice(lo, hi int) Matrix {
	checkSlice("fp8-e4m3-b128", m.rows, lo, hi)
	c := *m
	c.rows = hi - lo
	c.row0 = m.row0 + lo
	c.q = m.q[lo*m.cols : hi*m.cols : hi*m.cols]
	return &c
}

// DecodeRow writes f32(dec(byte) · scale) for each element of row r.
func (m *fp8) DecodeRow(dst []float32, r int) {
	checkRow("fp8-e4m3-b128", m.rows, m.cols, r, len(dst))
	q := m.q[r*m.cols : (r+1)*m.cols]
	sc := m.scales[4*((m.row0+r)/FP8Block)*m.nbc:]
	for i := range dst {
		dst[i] = float32(fp8f64[q[i]] * float64(f32At(sc, i/FP8Block)))
	}
}

// fp8Max is the largest finite E4M3 magnitude (code 0x7E).
const fp8Max = 448

// EncodeFP8E4M3 returns the E4M3 code nearest to v, ties to the even code
// (even mantissa); |v| ≥ 448 saturates to ±448, NaN encodes as 0x7F, and
// values that round to zero encode as +0.
func EncodeFP8E4M3(v float64) byte {
	if v != v {
		return 0x7F
	}
	var sign byte
	a := v
	if a < 0 {
		sign, a = 0x80, -a
	}
	if a >= fp8Max {
		return sign | 0x7E
	}
	// Codes 0x00..0x7E are ascending in value: find the first code whose
	// value is ≥ a, then compare with its predecessor.
	lo, hi := 0, 0x7E
	for lo < hi {
		mid := (lo + hi) / 2
		if fp8f64[mid] < a {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	c := lo
	if c > 0 {
		dlo, dhi := a-fp8f64[c-1], fp8f64[c]-a
		if dlo < dhi || (dlo == dhi && (c-1)&1 == 0) {
			c--
		}
	}
	if c == 0 {
		return 0
	}
	return sign | byte(c)
}
