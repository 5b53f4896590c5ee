package cache

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/require"
)

// synthExperts writes a checkpoint with layer 0's experts contiguous but
// stored in a shuffled tensor order, and layer 1's experts split by filler
// tensors (non-contiguous: six reads into a canonical layout). mutate may
// change the tensor list before writing.
func synthExperts(t *testing.T, ne int, mutate func([]safetensors.WriteTensor) []safetensors.WriteTensor) string {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var ts []safetensors.WriteTensor
	for l := range 2 {
		for e := range ne {
			p := layout.ExpertPrefix(l, e)
			var group []safetensors.WriteTensor
			for w := 1; w <= 3; w++ {
				packed := make([]byte, 8*32)
				scale := make([]byte, 8*2)
				for i := range packed {
					packed[i] = byte(r.Uint32())
				}
				for i := range scale {
					scale[i] = byte(118 + r.IntN(16)) // finite scales
				}
				group = append(group,
					safetensors.WriteTensor{Name: p + "w" + strconv.Itoa(w) + ".weight_packed", DType: safetensors.U8, Shape: []int64{8, 32}, Data: packed},
					safetensors.WriteTensor{Name: p + "w" + strconv.Itoa(w) + ".weight_scale", DType: safetensors.U8, Shape: []int64{8, 2}, Data: scale})
			}
			if l == 0 {
				// order inside the run is not assumed: w3, w1, w2 with scales first
				group = []safetensors.WriteTensor{group[5], group[4], group[1], group[0], group[3], group[2]}
				ts = append(ts, group...)
				continue
			}
			for i, g := range group {
				ts = append(ts, g, safetensors.WriteTensor{Name: p + "filler." + strconv.Itoa(i), DType: safetensors.U8,
					Shape: []int64{int64(100 + 37*i)}, Data: make([]byte, 100+37*i)})
			}
		}
	}
	if mutate != nil {
		ts = mutate(ts)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, safetensors.WriteFile(path, ts, nil))
	return path
}

func refExpert(t *testing.T, ck *safetensors.Checkpoint, l, e int) moe.Expert {
	t.Helper()
	var ms [3]quant.Matrix
	for w := range 3 {
		p := layout.ExpertPrefix(l, e) + "w" + strconv.Itoa(w+1)
		pt, err := ck.Require(p + ".weight_packed")
		require.NoError(t, err)
		st, err := ck.Require(p + ".weight_scale")
		require.NoError(t, err)
		pb, _ := ck.Bytes(pt)
		sb, _ := ck.Bytes(st)
		ms[w], err = quant.NewMXFP4(8, 64, pb, sb)
		require.NoError(t, err)
	}
	return moe.Expert{W1: ms[0], W2: ms[1], W3: ms[2]}
}

func sameExpert(t *testing.T, what string, got, want moe.Expert) {
	t.Helper()
	for i, pair := range [][2]quant.Matrix{{got.W1, want.W1}, {got.W2, want.W2}, {got.W3, want.W3}} {
		a, b := make([]float32, 64), make([]float32, 64)
		for r := range 8 {
			pair[0].(quant.RowDecoder).DecodeRow(a, r)
			pair[1].(quant.RowDecoder).DecodeRow(b, r)
			require.Equal(t, fmt.Sprint(b), fmt.Sprint(a), "%s: w%d row %d", what, i+1, r)
		}
	}
}

func TestContiguousAndScatteredLayouts(t *testing.T) {
	const ne = 6
	path := synthExperts(t, ne, nil)
	ck, err := safetensors.Open(path)
	require.NoError(t, err)
	defer ck.Close()
	probe, err := New(ck, Config{Layers: []int{0, 1}, NumExperts: ne, TopK: 2})
	require.NoError(t, err)
	require.True(t, probe.locs[0].contiguous)
	require.False(t, probe.locs[ne].contiguous)
	require.Equal(t, int64(3*(256+16)), probe.ExpertBytes())
	require.Zero(t, probe.SlotBytes()%4096)
	require.Greater(t, probe.SlotBytes(), SlotSize(probe.ExpertBytes()), "six windows need more room than one")
	slot := probe.SlotBytes()
	probe.Close()
	for _, slots := range []int{0, 3, 7} {
		for _, pol := range []PolicyName{LRU, S3FIFO} {
			s, err := New(ck, Config{Layers: []int{0, 1}, NumExperts: ne, TopK: 2, Budget: int64(slots) * slot,
				Shapes: &Shapes{W1: [2]int{8, 64}, W2: [2]int{8, 64}, W3: [2]int{8, 64}}},
				withStrictDirect(), WithPolicy(pol))
			require.NoError(t, err)
			r := rand.New(rand.NewPCG(uint64(slots), 3))
			for range 60 {
				l := r.IntN(2)
				ids := r.Perm(ne)[:2]
				out, release, err := s.Experts(l, ids, nil)
				require.NoError(t, err)
				for i, e := range ids {
					sameExpert(t, fmt.Sprintf("slots %d %s layer %d expert %d", slots, pol, l, e), out[i], refExpert(t, ck, l, e))
				}
				release()
			}
			require.NoError(t, s.Close())
		}
	}
}

func TestMalformedExperts(t *testing.T) {
	cases := map[string]struct {
		mutate func([]safetensors.WriteTensor) []safetensors.WriteTensor
		want   string
	}{
		"packed dtype": {func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i := range ts {
				if ts[i].Name == layout.ExpertPrefix(1, 2)+"w2.weight_packed" {
					ts[i].DType, ts[i].Shape = safetensors.F32, []int64{8, 8}
				}
			}
			return ts
		}, "w2.weight_packed is F32"},
		"group size": {func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i := range ts {
				if ts[i].Name == layout.ExpertPrefix(0, 1)+"w3.weight_scale" {
					ts[i].Shape, ts[i].Data = []int64{8, 4}, make([]byte, 32)
				}
			}
			return ts
		}, "experts.1.w3"},
		"rank": {func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i := range ts {
				if ts[i].Name == layout.ExpertPrefix(0, 0)+"w1.weight_packed" {
					ts[i].Shape = []int64{256}
				}
			}
			return ts
		}, "must be 2-D"},
		"missing": {func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			out := ts[:0]
			for _, t := range ts {
				if t.Name != layout.ExpertPrefix(1, 5)+"w1.weight_scale" {
					out = append(out, t)
				}
			}
			return out
		}, "experts.5.w1.weight_scale is missing"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ck, err := safetensors.Open(synthExperts(t, 6, c.mutate))
			require.NoError(t, err)
			defer ck.Close()
			_, err = New(ck, Config{Layers: []int{0, 1}, NumExperts: 6, TopK: 2})
			require.ErrorIs(t, err, ErrExpertTensor)
			require.ErrorContains(t, err, c.want)
		})
	}
}
