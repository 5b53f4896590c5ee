package mxfp4

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

func TestMatVecErrors(t *testing.T) {
	dst := make([]float32, 2)
	x := make([]float32, 64)
	if _, err := MatVecStats(dst, make([]byte, 63), make([]byte, 4), x); !errors.Is(err, ErrPackedSize) {
		t.Errorf("short packed: %v", err)
	}
	if _, err := MatVecStats(dst, make([]byte, 64), make([]byte, 2), x); !errors.Is(err, ErrGroupSize) {
		t.Errorf("group 64 scales: %v", err)
	}
	if _, err := MatVecStats(dst, make([]byte, 48), make([]byte, 4), x[:48]); !errors.Is(err, ErrWidth) {
		t.Errorf("width 48: %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("MatVec with bad geometry did not panic")
			} else if err, ok := r.(error); !ok || !errors.Is(err, ErrPackedSize) {
				t.Errorf("MatVec panicked with %v", r)
			}
		}()
		MatVec(dst, make([]byte, 1), make([]byte, 4), x)
	}()
	packed, scales := make([]byte, 64), make([]byte, 4)
	cases := []struct {
		dst          []float32
		stride, n    int
		x            []float32
		rows, cols   int
		wantSentinel error
	}{
		{make([]float32, 4), 2, 2, make([]float32, 127), 2, 64, ErrShape},
		{make([]float32, 3), 2, 2, make([]float32, 128), 2, 64, ErrShape},
		{make([]float32, 4), 1, 2, make([]float32, 128), 2, 64, ErrShape},
		{make([]float32, 4), 2, -1, nil, 2, 64, ErrShape},
		{make([]float32, 4), 2, 0, make([]float32, 1), 2, 64, ErrShape},
		{make([]float32, 4), 2, 2, make([]float32, 128), 2, 32, ErrPackedSize},
	}
	for i, c := range cases {
		if _, err := MatMul(c.dst, c.stride, packed, scales, c.x, c.n, c.rows, c.cols); !errors.Is(err, c.wantSentinel) {
			t.Errorf("case %d: %v, want %v", i, err, c.wantSentinel)
		}
	}
	if _, err := MatMul(make([]float32, 4), 2, packed, scales, make([]float32, 128), 2, 2, 64); err != nil {
		t.Errorf("valid MatMul: %v", err)
	}
}

// TestMatVecAgainstReference multiplies random matrices (scale bytes 0 and
// 255 included) with every kernel and compares each output bit for bit with
// the RG dot of the dequantised weights.
func TestMatVecAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := [][2]int{{1, 32}, {1, 64}, {3, 96}, {7, 32}, {5, 160}, {16, 256}, {33, 512}, {2, 3584}}
	for name, k := range kernels() {
		for _, sh := range append(shapes, shapes...) {
			rows, cols := sh[0], sh[1]
			packed, scales := randMatrix(rng, rows, cols, 100, 140, true)
			x := randVec(rng, cols)
			if rng.IntN(2) == 0 {
				x = randVecWild(rng, cols)
			}
			w := make([]float32, rows*cols)
			if err := Dequantize(w, packed, scales, rows, cols); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, rows)
			st := runMatVec(k, got, packed, scales, x)
			if want := ScanScales(scales); st != want {
				t.Errorf("%s %v: stats %+v, want %+v", name, sh, st, want)
			}
			want := make([]float32, rows)
			ng := cols / 32
			for r := range rows {
				want[r] = refDot(w[r*cols:(r+1)*cols], x, func(g int) bool { return scales[r*ng+g] == 255 })
			}
			testkit.RequireSameBitsOrNaN(t, name, got, want)
		}
	}
}

// TestFastEqualsGeneric compares each assembly kernel with the pure-Go twin
// over awkward shapes (the AVX-512 kernel works in blocks of eight groups,
// so widths run from one group to several blocks plus every tail length),
// extreme scales and non-finite activations.
func TestFastEqualsGeneric(t *testing.T) {
	asm := asmKernels()
	if len(asm) == 0 {
		t.Skip("no assembly kernel in this build or on this CPU")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 400 {
		rows := 1 + rng.IntN(9)
		cols := 32 * (1 + rng.IntN(6))
		if iter%2 == 1 {
			cols = 32 * (1 + rng.IntN(40))
		}
		lo := rng.IntN(250)
		packed, scales := randMatrix(rng, rows, cols, lo, lo+rng.IntN(255-lo), true)
		x := randVec(rng, cols)
		if iter%2 == 0 {
			x = randVecWild(rng, cols)
		}
		if iter%3 == 0 { // plant NaN/Inf inside 255 groups
			for i, s := range scales {
				if s == 255 && i < cols/32 {
					x[i*32+rng.IntN(32)] = float32(math.Inf(1 - 2*rng.IntN(2)))
					x[i*32+rng.IntN(32)] = float32(math.NaN())
				}
			}
		}
		if iter%50 == 1 { // huge and tiny activations
			x[rng.IntN(cols)] = math.MaxFloat32
			x[rng.IntN(cols)] = math.SmallestNonzeroFloat32
		}
		want := make([]float32, rows)
		sw := runMatVec(genericKernel, want, packed, scales, x)
		for name, k := range asm {
			got := make([]float32, rows)
			sg := runMatVec(k, got, packed, scales, x)
			testkit.RequireSameBitsOrNaN(t, name+" vs generic", got, want)
			if sg != sw {
				t.Fatalf("%s: stats differ: %+v vs %+v", name, sg, sw)
			}
		}
	}
}

// TestDeadGroupsIsolateNonFinite: NaN and Inf activations in the columns of
// a 255 group must not reach the output, in every kernel; elsewhere they do.
func TestDeadGroupsIsolateNonFinite(t *testing.T) {
	rows, cols := 2, 96
	packed := make([]byte, rows*cols/2)
	for i := range packed {
		packed[i] = 0x77 // +6 everywhere: 0·Inf cannot hide anything
	}
	scales := []byte{127, 255, 127, 127, 127, 255}
	x := make([]float32, cols)
	for i := range x {
		x[i] = 1
	}
	x[40] = float32(math.NaN())
	x[63] = float32(math.Inf(-1))
	for name, k := range kernels() {
		dst := make([]float32, rows)
		st := runMatVec(k, dst, packed, scales, x)
		if st.NaNScaleGroups != 2 {
			t.Errorf("%s: counted %d dead groups, want 2", name, st.NaNScaleGroups)
		}
		if dst[0] != 6*64 {
			t.Errorf("%s: row 0 = %v, want 384 (group 1 skipped)", name, dst[0])
		}
		if !math.IsNaN(float64(dst[1])) {
			t.Errorf("%s: row 1 = %v, want NaN from its live group 1", name, dst[1])
		}
	}
}

// TestMatMulEqualsMatVec checks that every batched element equals MatVec's
// for n = 1..17 and strides wider than the row count.
func TestMatMulEqualsMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for name, k := range kernels() {
		for n := 1; n <= 17; n++ {
			rows, cols := 1+rng.IntN(12), 32*(1+rng.IntN(20))
			packed, scales := randMatrix(rng, rows, cols, 110, 130, true)
			x := randVec(rng, n*cols)
			if n%2 == 0 {
				x = randVecWild(rng, n*cols)
			}
			checkMatMul(t, fmt.Sprintf("%s n=%d", name, n), k, packed, scales, x, n, rows, cols, rows+rng.IntN(3))
		}
	}
}

// TestMatMulBlocks crosses MatMul's row-block boundary and splits rows with
// RowRange, which must not change a bit.
func TestMatMulBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	rows, cols, n := 300, 1024, 3 // 512 packed bytes per row: 256 rows per block
	packed, scales := randMatrix(rng, rows, cols, 115, 125, false)
	x := randVec(rng, n*cols)
	dst := make([]float32, n*rows)
	if _, err := MatMul(dst, rows, packed, scales, x, n, rows, cols); err != nil {
		t.Fatal(err)
	}
	for ti := range n {
		want := make([]float32, rows)
		MatVec(want, packed, scales, x[ti*cols:(ti+1)*cols])
		testkit.RequireSameBitsOrNaN(t, "matmul", dst[ti*rows:(ti+1)*rows], want)
		part := make([]float32, rows)
		for lo := 0; lo < rows; lo += 77 {
			hi := min(rows, lo+77)
			p, s, err := RowRange(packed, scales, cols, lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			MatVec(part[lo:hi], p, s, x[ti*cols:(ti+1)*cols])
		}
		testkit.RequireSameBitsOrNaN(t, "row ranges", part, want)
	}
}

// TestEmptyShapes: zero rows or columns are valid and produce +0 rows.
func TestEmptyShapes(t *testing.T) {
	for name, k := range kernels() {
		dst := []float32{5, 5}
		runMatVec(k, dst, nil, nil, nil)
		if math.Float32bits(dst[0]) != 0 || math.Float32bits(dst[1]) != 0 {
			t.Errorf("%s: zero columns gave %v", name, dst)
		}
		runMatVec(k, nil, nil, nil, make([]float32, 32))
	}
	if _, err := MatMul([]float32{1, 1, 1, 1}, 2, nil, nil, nil, 2, 2, 0); err != nil {
		t.Fatal(err)
	}
}

// TestSummationOrder makes the order of the float64 additions visible in the
// float32 result: weights ±1 or 0 and activations ±2^40, ±1, ±2^−20, so big
// terms cancel exactly and whether a small term was absorbed before or after
// the cancellation decides the output. Every other iteration keeps one
// nonzero weight per group and a single scale, so each group contributes one
// of those terms and the order in which acc adds the groups shows. Any other
// lane partition, tree or group order (checked by mutating the kernels,
// also MatMul's two-row kernel) fails here.
func TestSummationOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	nib := []byte{2, 10, 0, 2, 10}
	vals := []float32{1 << 40, -(1 << 40), 1, -1, 1.0 / (1 << 20)}
	for name, k := range kernels() {
		for iter := range 400 {
			rows, cols := 1+rng.IntN(4), 32*(1+rng.IntN(20))
			packed, scales := randMatrix(rng, rows, cols, 120, 134, false)
			for i := range packed {
				packed[i] = nib[rng.IntN(len(nib))] | nib[rng.IntN(len(nib))]<<4
			}
			if iter%2 == 1 {
				clear(packed)
				for g := range scales {
					scales[g] = 127
					j := rng.IntN(32)
					packed[g*16+j/2] = nib[rng.IntN(len(nib))] << (4 * (j % 2))
				}
			}
			// 3: MatMul's paired activation rows and the odd one; 27: the
			// packed kernel, with a block of eight weight rows when rows
			// reaches it.
			n := 3
			if iter%4 >= 2 {
				n, rows = 27, rows+6
				packed, scales = growRows(rng, packed, scales, rows, cols)
			}
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = vals[rng.IntN(len(vals))]
			}
			w := make([]float32, rows*cols)
			if err := Dequantize(w, packed, scales, rows, cols); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, rows)
			runMatVec(k, got, packed, scales, x[:cols])
			batch := make([]float32, n*rows)
			matMul(k, batch, rows, packed, scales, x, n, rows, cols)
			want := make([]float32, n*rows)
			for ti := range n {
				for r := range rows {
					want[ti*rows+r] = refDot(w[r*cols:(r+1)*cols], x[ti*cols:(ti+1)*cols], nil)
				}
			}
			testkit.RequireSameBitsOrNaN(t, name, got, want[:rows])
			testkit.RequireSameBitsOrNaN(t, name+" matmul", batch, want)
		}
	}
}

// growRows returns the matrix with rows rows: the given ones, then copies of
// random earlier rows (so their codes keep the shape the caller chose).
func growRows(rng *rand.Rand, packed, scales []byte, rows, cols int) ([]byte, []byte) {
	pb, sb := cols/2, cols/GroupSize
	have := len(scales) / sb
	for r := have; r < rows; r++ {
		src := rng.IntN(have)
		packed = append(packed, packed[src*pb:(src+1)*pb]...)
		scales = append(scales, scales[src*sb:(src+1)*sb]...)
	}
	return packed, scales
}

// TestMatMulPacked runs the packed mat-mul (from gemmMinRows activation
// rows on) against MatVec on shapes that leave every remainder of the
// eight-row blocks and the activation triples, and carry scale-255 groups
// and non-finite activations.
func TestMatMulPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	shapes := [][3]int{ // rows, cols, n
		{3, 32, 24}, {4, 64, 25}, {5, 288, 29}, {47, 1024, 24}, {100, 544, 31},
		{301, 2048, 40}, {2, 256, 33},
	}
	for name, k := range kernels() {
		for i, sh := range shapes {
			rows, cols, n := sh[0], sh[1], sh[2]
			packed, scales := randMatrix(rng, rows, cols, 110, 135, i%2 == 0)
			x := randVec(rng, n*cols)
			if i%3 == 1 {
				x = randVecWild(rng, n*cols)
			}
			checkMatMul(t, fmt.Sprintf("%s %v", name, sh), k, packed, scales, x, n, rows, cols, rows+2)
		}
	}
}

// TestPackedAssociation pins the association of every RG sum in MatMul's
// packed form, where random data rarely shows it: weights are all 1, and
// activation row p holds 2^40, −2^40 and 2^−20 in three columns of one group
// (all other columns 0), so the result is 2^−20 or 0 depending on whether the
// small term met a big one first. The columns run over every ordered triple
// of distinct lanes (the tree) and over random triples of columns (the
// order within a lane and across lanes).
func TestPackedAssociation(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const rows, cols = 9, 64 // a block of eight weight rows and one more
	var triples [][3]int
	for a := range 8 {
		for b := range 8 {
			for c := range 8 {
				if a != b && b != c && a != c {
					triples = append(triples, [3]int{a + 8*rng.IntN(4), b + 8*rng.IntN(4), c + 8*rng.IntN(4)})
				}
			}
		}
	}
	for range 200 {
		p := rng.Perm(32)
		triples = append(triples, [3]int{p[0], p[1], p[2]})
	}
	n := len(triples)
	packed := make([]byte, rows*cols/2)
	for i := range packed {
		packed[i] = 2 | 2<<4 // E2M1 1.0 in both nibbles
	}
	scales := make([]byte, rows*cols/GroupSize)
	for i := range scales {
		scales[i] = 127
	}
	x := make([]float32, n*cols)
	for p, tr := range triples {
		g := 32 * (p % 2) // either group of the row
		x[p*cols+g+tr[0]] = 1 << 40
		x[p*cols+g+tr[1]] = -(1 << 40)
		x[p*cols+g+tr[2]] = 1.0 / (1 << 20)
	}
	for name, k := range kernels() {
		dst := make([]float32, n*rows)
		matMul(k, dst, rows, packed, scales, x, n, rows, cols)
		for p := range n {
			want := make([]float32, rows)
			runMatVec(genericKernel, want, packed, scales, x[p*cols:(p+1)*cols])
			testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%s columns %v", name, triples[p]), dst[p*rows:(p+1)*rows], want)
		}
	}
}

// checkMatMul runs matMul with k on n activation rows into a dst of the
// given stride and requires each row's outputs to equal MatVec's bit for
// bit, the statistics to be ScanScales', and the gaps between rows to stay
// untouched.
func checkMatMul(t *testing.T, what string, k kernel, packed, scales []byte, x []float32, n, rows, cols, stride int) {
	t.Helper()
	dst := make([]float32, (n-1)*stride+rows)
	for i := range dst {
		dst[i] = -7
	}
	st := matMul(k, dst, stride, packed, scales, x, n, rows, cols)
	if want := ScanScales(scales); st != want {
		t.Errorf("%s: stats %+v, want %+v", what, st, want)
	}
	for ti := range n {
		want := make([]float32, rows)
		runMatVec(k, want, packed, scales, x[ti*cols:(ti+1)*cols])
		testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("%s position %d", what, ti), dst[ti*stride:ti*stride+rows], want)
		for i := ti*stride + rows; i < min(len(dst), (ti+1)*stride); i++ {
			if dst[i] != -7 {
				t.Fatalf("%s: gap element %d overwritten", what, i)
			}
		}
	}
}
