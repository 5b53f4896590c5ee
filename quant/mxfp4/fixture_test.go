package mxfp4

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// loadFixture returns the MXFP4 sample and its bytes.
func loadFixture(tb testing.TB) (f *testkit.MXFP4Sample, packed, scales []byte) {
	tb.Helper()
	f = testkit.MXFP4(tb)
	return f, f.PackedBytes, f.ScaleBytes
}

func TestFixtureGeometryAndTable(t *testing.T) {
	f, packed, scales := loadFixture(t)
	if f.GroupSize != GroupSize {
		t.Fatalf("group_size %d", f.GroupSize)
	}
	if err := CheckShapes(f.Rows, f.LogicalWidth, f.Packed.Shape, f.Scales.Shape); err != nil {
		t.Fatal(err)
	}
	if err := Check(f.Rows, f.LogicalWidth, len(packed), len(scales)); err != nil {
		t.Fatal(err)
	}
	if len(f.LUT) != 16 {
		t.Fatalf("e2m1_lut has %d entries", len(f.LUT))
	}
	for c, v := range f.LUT {
		if math.Float32bits(E2M1(byte(c))) != math.Float32bits(float32(v)) {
			t.Errorf("E2M1(%d) = %v, fixture %v", c, E2M1(byte(c)), v)
		}
	}
}

// TestFixtureDequantize: the released bytes decode to the oracle's floats
// bit for bit, and the swapped-nibble reading differs and matches the
// fixture's record of that mistake.
func TestFixtureDequantize(t *testing.T) {
	f, packed, scales := loadFixture(t)
	rows, cols := f.Rows, f.LogicalWidth
	got := make([]float32, rows*cols)
	st, err := DequantizeStats(got, packed, scales, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stats{Groups: rows * cols / 32}) {
		t.Errorf("stats %+v", st)
	}
	if len(f.Expected.Data) != rows*cols {
		t.Fatalf("expected has %d values", len(f.Expected.Data))
	}
	for i, v := range f.Expected.Data {
		if math.Float32bits(got[i]) != math.Float32bits(float32(v)) {
			t.Fatalf("element %d (row %d, col %d) = %v, want %v", i, i/cols, i%cols, got[i], v)
		}
	}
	// Row by row into scratch gives the same values.
	row := make([]float32, cols)
	for r := range rows {
		if _, err := DequantizeRow(row, packed[r*cols/2:(r+1)*cols/2], scales[r*cols/32:(r+1)*cols/32]); err != nil {
			t.Fatal(err)
		}
		testkit.RequireSameBitsOrNaN(t, "DequantizeRow", row, got[r*cols:(r+1)*cols])
	}

	swapped := make([]byte, len(packed))
	for i, b := range packed {
		swapped[i] = b>>4 | b<<4
	}
	wrong := make([]float32, rows*cols)
	if err := Dequantize(wrong, swapped, scales, rows, cols); err != nil {
		t.Fatal(err)
	}
	if len(f.Swapped.First64) != 64 {
		t.Fatalf("first64 has %d values", len(f.Swapped.First64))
	}
	differ := 0
	for i, v := range f.Swapped.First64 {
		if math.Float32bits(wrong[i]) != math.Float32bits(float32(v)) {
			t.Fatalf("swapped element %d = %v, fixture %v", i, wrong[i], v)
		}
		if math.Float32bits(wrong[i]) != math.Float32bits(got[i]) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("swapped nibbles decode like the correct order: the test cannot tell them apart")
	}
}

// TestFixtureMatVec multiplies the released bytes by random activations with
// every kernel and compares with the RG dot of the oracle's own dequantised
// floats, bit for bit; MatMul and row splits must agree too.
func TestFixtureMatVec(t *testing.T) {
	f, packed, scales := loadFixture(t)
	rows, cols := f.Rows, f.LogicalWidth
	w := make([]float32, len(f.Expected.Data))
	for i, v := range f.Expected.Data {
		w[i] = float32(v)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 4 {
		x := randVec(rng, cols)
		if trial%2 == 1 {
			x = randVecWild(rng, cols)
		}
		want := refMatVec(w, x, rows)
		requireKernels(t, packed, scales, x, want)
		got := make([]float32, rows)
		MatVec(got, packed, scales, x)
		testkit.RequireSameBitsOrNaN(t, "MatVec", got, want)
	}
}

// TestFixtureEntropy measures the order-0 entropy of the released nibbles and
// scale bytes (§6.10 reports 3.753 bits/nibble and 0.66 bits/byte).
func TestFixtureEntropy(t *testing.T) {
	_, packed, scales := loadFixture(t)
	nib, sc := nibbleEntropy(packed), byteEntropy(scales)
	t.Logf("order-0 entropy: %.4f bits/nibble (%.1f%% below 4), %.4f bits/scale byte", nib, 100*(1-nib/4), sc)
	if math.Abs(nib-3.753) > 0.001 || math.Abs(sc-0.66) > 0.005 {
		t.Errorf("entropies %.4f, %.4f differ from §6.10's 3.753, 0.66", nib, sc)
	}
}
