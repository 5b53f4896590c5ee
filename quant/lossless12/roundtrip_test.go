package lossless12

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// bf16Bytes encodes codes as little-endian bytes.
func bf16Bytes(codes []uint16) []byte {
	b := make([]byte, 2*len(codes))
	for i, c := range codes {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

// gaussianBF16 draws rows·cols weights of deviation s, truncated to bf16
// (the way a checkpoint holds trained weights).
func gaussianBF16(r *rand.Rand, rows, cols int, s float64) []byte {
	v := testkit.Gaussian(r, rows*cols, s)
	codes := make([]uint16, len(v))
	for i, f := range v {
		codes[i] = uint16(math.Float32bits(f) >> 16)
	}
	return bf16Bytes(codes)
}

// roundTrip encodes w, opens the result and checks every row decodes to
// the original bytes and to their §5.1 widening.
func roundTrip(t *testing.T, rows, cols int, w []byte) []byte {
	t.Helper()
	enc, err := Encode(rows, cols, w)
	if err != nil {
		t.Fatalf("Encode [%d, %d]: %v", rows, cols, err)
	}
	m, err := Open(enc)
	if err != nil {
		t.Fatalf("Open [%d, %d]: %v", rows, cols, err)
	}
	if m.Rows() != rows || m.Cols() != cols {
		t.Fatalf("Open: [%d, %d], want [%d, %d]", m.Rows(), m.Cols(), rows, cols)
	}
	row, twin := make([]byte, 2*cols), make([]byte, 2*cols)
	f := make([]float32, cols)
	g := pureGo(m)
	for r := range rows {
		m.DecodeRowBF16(row, r)
		g.DecodeRowBF16(twin, r)
		if !bytes.Equal(row, twin) {
			t.Fatalf("[%d, %d] row %d: the decoders differ", rows, cols, r)
		}
		want := w[2*r*cols : 2*(r+1)*cols]
		if !bytes.Equal(row, want) {
			for c := range cols {
				if g, w := binary.LittleEndian.Uint16(row[2*c:]), binary.LittleEndian.Uint16(want[2*c:]); g != w {
					t.Fatalf("[%d, %d] row %d col %d: decoded %#04x, want %#04x", rows, cols, r, c, g, w)
				}
			}
		}
		m.DecodeRow(f, r)
		for c := range cols {
			if got, want := math.Float32bits(f[c]), uint32(binary.LittleEndian.Uint16(want[2*c:]))<<16; got != want {
				t.Fatalf("row %d col %d: DecodeRow %#08x, want %#08x", r, c, got, want)
			}
		}
	}
	st, err := Measure(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes != int64(len(enc)) || st.MaxRowEscapes != m.Header().Escapes {
		t.Fatalf("Measure: %d bytes and %d escapes per row, encoder wrote %d and %d", st.Bytes, st.MaxRowEscapes, len(enc), m.Header().Escapes)
	}
	return enc
}

// pureGo returns m with the assembly decoder turned off.
func pureGo(m *Matrix) *Matrix {
	g := *m
	g.simd, g.wide = false, false
	return &g
}

// TestDecoderLevels checks that Open picks the best decoder this binary
// and CPU have (the tests then compare it with the pure-Go twin), so that a
// matrix never runs a lower level than Level reports, and says which.
func TestDecoderLevels(t *testing.T) {
	m, err := Open(mustEncode(t, 1, 64, make([]byte, 128)))
	if err != nil {
		t.Fatal(err)
	}
	if m.simd != haveAVX2 || m.wide != haveWide {
		t.Fatalf("Open chose assembly %v, AVX-512 %v; the CPU and build have %v, %v", m.simd, m.wide, haveAVX2, haveWide)
	}
	if v := m.Slice(0, 1); v.simd != m.simd || v.wide != m.wide {
		t.Fatal("Slice dropped the decoder level")
	}
	if rm, err := OpenRows(64, 0, mustEncode(t, 1, 64, make([]byte, 128))[HeaderSize:]); err != nil || rm.simd != haveAVX2 || rm.wide != haveWide {
		t.Fatalf("OpenRows: %v, assembly %v, AVX-512 %v", err, rm != nil && rm.simd, rm != nil && rm.wide)
	}
	t.Logf("level %s (assembly decoder %v, AVX-512 %v)", Level(), m.simd, m.wide)
}

func mustEncode(t testing.TB, rows, cols int, w []byte) []byte {
	t.Helper()
	enc, err := Encode(rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// mustOpen encodes the rows×cols bf16 matrix w and opens the encoding.
func mustOpen(t testing.TB, rows, cols int, w []byte) *Matrix {
	t.Helper()
	m, err := Open(mustEncode(t, rows, cols, w))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEveryCode round-trips all 65,536 bf16 codes (±0, subnormals, ±Inf,
// every NaN payload) in three arrangements: in code order, where each
// block holds 64 neighbours; shuffled, where most blocks escape; and in a
// width that leaves a short last block whose planes end in padding bits.
func TestEveryCode(t *testing.T) {
	codes := make([]uint16, 1<<16)
	for i := range codes {
		codes[i] = uint16(i)
	}
	roundTrip(t, 1024, 64, bf16Bytes(codes))
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(codes), func(i, j int) { codes[i], codes[j] = codes[j], codes[i] })
	roundTrip(t, 512, 128, bf16Bytes(codes))
	roundTrip(t, 1, 1<<16, bf16Bytes(codes))
	roundTrip(t, 2048, 32, bf16Bytes(codes))
	odd := codes[:101*611]
	roundTrip(t, 611, 101, bf16Bytes(odd))
}

// TestShapes round-trips Gaussian weights, with a few specials planted, in
// widths around the block size and in empty shapes.
func TestShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][2]int{{0, 0}, {0, 7}, {3, 0}, {1, 1}, {5, 63}, {5, 64}, {5, 65}, {7, 127}, {9, 129}, {4, 1000}} {
		w := gaussianBF16(r, sh[0], sh[1], 0.02)
		for _, sp := range []uint16{0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC1, 0xFFFF, 0x7F7F} {
			if len(w) > 0 {
				binary.LittleEndian.PutUint16(w[2*r.IntN(len(w)/2):], sp)
			}
		}
		roundTrip(t, sh[0], sh[1], w)
	}
}

// TestRealisticRatio checks the design target: trained-like weights (bf16
// Gaussians at the deviations of K3's projections) cost at most 0.72× their
// bf16 bytes (11.5 bits a weight), with at most 3% of the weights escaping.
func TestRealisticRatio(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		rows, cols int
		s          float64
	}{{256, 7168, 0.02}, {512, 2048, 0.006}, {128, 512, 1}} {
		w := gaussianBF16(r, tc.rows, tc.cols, tc.s)
		st, err := Measure(tc.rows, tc.cols, w)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("σ=%g: %v", tc.s, st)
		if st.Ratio() > 0.72 || st.EscapeRate() > 0.03 {
			t.Errorf("[%d, %d] σ=%g: %v, want ≤ 0.72× and ≤ 3%% escapes", tc.rows, tc.cols, tc.s, st)
		}
		if st.ExponentEntropy < 1 || st.ExponentEntropy > 4 {
			t.Errorf("exponent entropy %.3f bits outside the range of a Gaussian's", st.ExponentEntropy)
		}
	}
}

// TestDeterministic: one encoding per matrix, whatever was encoded before.
func TestDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	w := gaussianBF16(r, 33, 200, 0.05)
	a, _ := Encode(33, 200, w)
	_, _ = Encode(2, 2, []byte{0xFF, 0xFF, 0, 0, 1, 0, 0x80, 0x3F})
	b, _ := Encode(33, 200, w)
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings of the same weights differ")
	}
}

func TestEncodeRefusesShape(t *testing.T) {
	for _, tc := range []struct {
		rows, cols, n int
	}{{2, 3, 10}, {-1, 3, 0}, {3, -1, 0}, {1 << 31, 1, 0}} {
		if _, err := Encode(tc.rows, tc.cols, make([]byte, tc.n)); !errors.Is(err, ErrShape) {
			t.Errorf("Encode(%d, %d, %d bytes) = %v, want ErrShape", tc.rows, tc.cols, tc.n, err)
		}
		if _, err := Measure(tc.rows, tc.cols, make([]byte, tc.n)); !errors.Is(err, ErrShape) {
			t.Errorf("Measure(%d, %d, %d bytes) = %v, want ErrShape", tc.rows, tc.cols, tc.n, err)
		}
	}
}

func TestEscapesForSize(t *testing.T) {
	for _, h := range []Header{{3, 100, 0}, {3, 100, 7}, {1, 1, 1}, {0, 5, 0}, {40, 7168, 12}} {
		e, ok := EscapesForSize(h.Rows, h.Cols, h.Size())
		if !ok || e != h.Escapes {
			t.Errorf("EscapesForSize(%v, %d) = %d, %v", h, h.Size(), e, ok)
		}
		if h.Rows > 1 {
			if _, ok := EscapesForSize(h.Rows, h.Cols, h.Size()+1); ok {
				t.Errorf("EscapesForSize(%v, %d+1) accepted", h, h.Size())
			}
		}
	}
	if _, ok := EscapesForSize(2, 4, Header{2, 4, 5}.Size()); ok {
		t.Error("more escape bytes than columns accepted")
	}
}

// TestMeterPieces: rows added in pieces measure as the whole matrix, and
// pieces that are not whole rows are refused.
func TestMeterPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	w := gaussianBF16(r, 40, 150, 0.02)
	binary.LittleEndian.PutUint16(w[20:], 0)
	whole, err := Measure(40, 150, w)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := NewMeter(150)
	if err != nil {
		t.Fatal(err)
	}
	for _, rows := range []int{1, 7, 0, 32} {
		if err := mt.Add(w[:2*150*rows]); err != nil {
			t.Fatal(err)
		}
		w = w[2*150*rows:]
	}
	if got := mt.Stats(); got != whole {
		t.Fatalf("in pieces %v, whole %v", got, whole)
	}
	if err := mt.Add(make([]byte, 299)); !errors.Is(err, ErrShape) {
		t.Fatalf("a part row: %v", err)
	}
	if whole.Escapes == 0 || whole.Bytes <= HeaderSize {
		t.Fatalf("%v: the sample should escape", whole)
	}
}
