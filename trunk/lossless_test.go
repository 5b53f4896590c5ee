package trunk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/safetensors"
)

// lossless12Source writes the same layers twice, once in bf16 and once as
// lossless12 rows (§6.11), and returns both descriptions and the bf16
// matrices. The weights are Gaussian with a few zeros and subnormals, which
// escape their windows; with cancel, a one in fifty, and every third
// 16-column stripe of a row holds eight pairs (w, −w) over random lanes,
// which cancel under R16 against an activation of 2^30 across the stripe
// (cancellingInput), so the result depends on the lane map and the tree.
func lossless12Source(t *testing.T, nl, rows, cols int, cancel bool) (bf, l12 []Tensor, ref map[string]quant.Matrix) {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(27, 5))
	var bbuf, lbuf bytes.Buffer
	bbuf.Write(make([]byte, 100))
	lbuf.Write(make([]byte, 77))
	ref = map[string]quant.Matrix{}
	add := func(item int, name string, rows int) {
		w := make([]byte, 2*rows*cols)
		for i := range rows * cols {
			c := uint16(math.Float32bits(float32(r.NormFloat64()*0.02)) >> 16)
			if (cancel && r.IntN(50) == 0) || r.IntN(5000) == 0 {
				c &= 0x807F
			}
			binary.LittleEndian.PutUint16(w[2*i:], c)
		}
		for row := range rows {
			for s := 0; cancel && s+16 <= cols; s += 48 {
				p := r.Perm(16)
				for k := 0; k < 16; k += 2 {
					i, j := row*cols+s+p[k], row*cols+s+p[k+1]
					binary.LittleEndian.PutUint16(w[2*j:], binary.LittleEndian.Uint16(w[2*i:])^0x8000)
				}
			}
		}
		m, err := quant.NewBF16(rows, cols, w)
		require.NoError(t, err)
		ref[name] = m
		bf = append(bf, Tensor{Item: item, Name: name, File: filepath.Join(dir, "bf16.bin"), Offset: int64(bbuf.Len()),
			Size: int64(len(w)), DType: safetensors.BF16, Rows: rows, Cols: cols})
		bbuf.Write(w)
		bbuf.Write(make([]byte, 6))
		enc, err := lossless12.Encode(rows, cols, w)
		require.NoError(t, err)
		h, err := lossless12.ParseHeader(enc)
		require.NoError(t, err)
		body := enc[lossless12.HeaderSize:]
		l12 = append(l12, Tensor{Item: item, Name: name, File: filepath.Join(dir, "l12.bin"), Offset: int64(lbuf.Len()),
			Size: int64(len(body)), DType: safetensors.U8, Format: quant.Lossless12, Escapes: h.Escapes, Rows: rows, Cols: cols})
		lbuf.Write(body)
		lbuf.Write(make([]byte, 3))
	}
	for l := range nl {
		add(l, fmt.Sprintf("layers.%d.a", l), rows)
		add(l, fmt.Sprintf("layers.%d.b", l), rows/2)
	}
	add(Head, "head", rows)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bf16.bin"), bbuf.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "l12.bin"), lbuf.Bytes(), 0o644))
	return bf, l12, ref
}

// TestLossless12Trunk: a trunk of lossless12 tensors gives the bf16 trunk's
// bits at the floor, in between and all pinned, on one and two workers,
// and its plan counts the encoded bytes, so the same budget pins more.
func TestLossless12Trunk(t *testing.T) {
	const nl, rows, cols = 4, 96, 320
	bf, l12, ref := lossless12Source(t, nl, rows, cols, true)
	r := rand.New(rand.NewPCG(27, 6))
	x := cancellingInput(r, cols)
	want := map[string][]float32{}
	for name, m := range ref {
		want[name] = make([]float32, m.Rows())
		m.MatVec(want[name], x)
	}

	// The plans are compared on realistic weights; the cancelling ones
	// escape too often to save bytes.
	bfR, l12R, _ := lossless12Source(t, nl, 64, 2048, false)
	all12, err := NewPlan(l12R, nl, PlanConfig{Budget: 1 << 40})
	require.NoError(t, err)
	allBF, err := NewPlan(bfR, nl, PlanConfig{Budget: 1 << 40})
	require.NoError(t, err)
	ratio := float64(all12.LayerBytes+all12.HeadBytes) / float64(allBF.LayerBytes+allBF.HeadBytes)
	t.Logf("layers and head: %d bytes in lossless12, %d in bf16 (%.4f×)",
		all12.LayerBytes+all12.HeadBytes, allBF.LayerBytes+allBF.HeadBytes, ratio)
	require.Less(t, ratio, 0.77)
	// The budget that holds the whole lossless12 trunk pins all of it, and
	// not all of the bf16 one.
	midBF, err := NewPlan(bfR, nl, PlanConfig{Budget: all12.Total})
	require.NoError(t, err)
	t.Logf("a budget of %d bytes pins %d layers (head %v) in bf16, all %d and the head in lossless12",
		all12.Total, len(midBF.Pinned), midBF.HeadPinned, nl)
	require.Len(t, all12.Pinned, nl)
	require.True(t, all12.HeadPinned)
	require.Less(t, len(midBF.Pinned)+b2i(midBF.HeadPinned), nl+1)
	_ = bf

	for _, budget := range []struct {
		name  string
		bytes int64
	}{{"floor", floorOf(t, l12, nl)}, {"mixed", floorOf(t, l12, nl) + 2*pinnedBytes(&l12[0]) + 2*pinnedBytes(&l12[1]) + 3*8192}, {"all", 1 << 40}} {
		for _, workers := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/w%d", budget.name, workers), func(t *testing.T) {
				p, err := NewPlan(l12, nl, PlanConfig{Budget: budget.bytes, SlotBytes: 1})
				require.NoError(t, err)
				switch budget.name {
				case "floor":
					require.Empty(t, p.Pinned)
				case "mixed":
					require.NotEmpty(t, p.Pinned)
					require.Positive(t, p.Slots)
				case "all":
					require.Zero(t, p.Slots)
				}
				s, err := Open(p, l12, Options{ChunkBytes: 4096})
				require.NoError(t, err)
				defer s.Close()
				for range 2 {
					for _, tt := range l12 {
						m, ok := s.Matrix(tt.Name)
						require.True(t, ok)
						require.Equal(t, quant.Lossless12, m.Format())
						got := make([]float32, tt.Rows)
						quant.MatVecParallel(m, got, x, workers)
						require.NoError(t, s.Err())
						testkit.RequireSameBits(t, tt.Name, got, want[tt.Name])
						mm := make([]float32, 3*tt.Rows)
						quant.MatMulParallel(m, mm, tt.Rows, append(append(append([]float32(nil), x...), x...), x...), 3, workers)
						require.NoError(t, s.Err())
						testkit.RequireSameBits(t, tt.Name+" MatMul", mm[2*tt.Rows:], want[tt.Name])
					}
				}
			})
		}
	}
}

// cancellingInput is the activation lossless12Source's cancelling weights
// are built for: ±2^30 across every third 16-column stripe, Gaussian
// elsewhere.
func cancellingInput(r *rand.Rand, cols int) []float32 {
	x := make([]float32, cols)
	for i := range x {
		switch {
		case i+16-i%16 <= cols && i%48 == 0:
			x[i] = float32(math.Ldexp(1, 30)) * float32(1-2*r.IntN(2))
		case i+16-i%16 <= cols && i%48 < 16:
			x[i] = x[i-1]
		default:
			x[i] = float32(r.NormFloat64())
		}
	}
	return x
}

func floorOf(t *testing.T, ts []Tensor, nl int) int64 {
	p, err := NewPlan(ts, nl, PlanConfig{Budget: 1 << 40})
	require.NoError(t, err)
	return p.Floor
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLossless12TensorChecks: a lossless12 tensor's size must be that of its
// rows, and a malformed block in a streamed piece fails the read by name.
func TestLossless12TensorChecks(t *testing.T) {
	_, l12, _ := lossless12Source(t, 1, 32, 128, false)
	bad := l12[0]
	bad.Size++
	_, err := NewPlan([]Tensor{bad, l12[1], l12[2]}, 1, PlanConfig{Budget: 1 << 40})
	require.ErrorIs(t, err, ErrTensor)

	// Corrupt the first window base of the head and stream it.
	head := l12[2]
	f, err := os.OpenFile(head.File, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{250}, head.Offset)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	p, err := NewPlan(l12, 1, PlanConfig{Budget: floorOf(t, l12, 1), SlotBytes: 1})
	require.NoError(t, err)
	s, err := Open(p, l12, Options{})
	require.NoError(t, err)
	defer s.Close()
	m, _ := s.Matrix(head.Name)
	got := make([]float32, head.Rows)
	m.MatVec(got, make([]float32, head.Cols))
	require.ErrorIs(t, s.Err(), lossless12.ErrMalformed)
	for _, v := range got[:1] {
		require.True(t, math.IsNaN(float64(v)), "rows of a refused piece are NaN, never decoded")
	}
}
