package k3_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/safetensors"
)

// gainSuffixes name the RMSNorm gains, the vectors a model holds at their stored width.
var gainSuffixes = []string{"input_layernorm.weight", "post_attention_layernorm.weight",
	"q_a_layernorm.weight", "kv_a_layernorm.weight", "o_norm.weight", "routed_expert_norm.weight", "model.norm.weight"}

func isGainName(name string) bool {
	for _, s := range gainSuffixes {
		if strings.HasSuffix(name, "."+s) {
			return true
		}
	}
	return false
}

// gainsAs copies the F32 checkpoint src with every gain's values cut to bfloat16 precision and
// stored as dtype (F32 or BF16), so two copies made with the two dtypes hold the same values.
// It returns the directory and the number of gain elements rewritten.
func gainsAs(t *testing.T, src string, dtype safetensors.DType) (string, int64) {
	t.Helper()
	dst := testkit.CopyDir(t, src)
	files, err := filepath.Glob(filepath.Join(dst, "*.safetensors"))
	require.NoError(t, err)
	var elems, shrink int64
	for _, f := range files {
		ck, err := safetensors.Open(f)
		require.NoError(t, err)
		var out []safetensors.WriteTensor
		for _, tt := range ck.Tensors() {
			data, err := ck.Read(tt)
			require.NoError(t, err)
			if isGainName(tt.Name) {
				require.Equal(t, safetensors.F32, tt.DType, tt.Name)
				data = bf16Cut(data, dtype)
				elems += tt.NumElements()
				shrink += tt.Size - int64(len(data))
			}
			out = append(out, safetensors.WriteTensor{Name: tt.Name, DType: dtypeOf(tt, dtype), Shape: tt.Shape, Data: data})
		}
		require.NoError(t, ck.Close())
		require.NoError(t, safetensors.WriteFile(f, out, nil))
	}
	require.NotZero(t, elems, "no gains in %s", src)
	index := filepath.Join(dst, "model.safetensors.index.json")
	raw, err := os.ReadFile(index)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	meta := doc["metadata"].(map[string]any)
	meta["total_size"] = int64(meta["total_size"].(float64)) - shrink
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(index, raw, 0o644))
	return dst, elems
}

func dtypeOf(tt *safetensors.Tensor, gain safetensors.DType) safetensors.DType {
	if isGainName(tt.Name) {
		return gain
	}
	return tt.DType
}

// bf16Cut truncates little-endian float32 values to their top 16 bits, written as float32 or as
// bfloat16.
func bf16Cut(data []byte, dtype safetensors.DType) []byte {
	n := len(data) / 4
	if dtype == safetensors.BF16 {
		out := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(binary.LittleEndian.Uint32(data[4*i:])>>16))
		}
		return out
	}
	out := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(out[4*i:], binary.LittleEndian.Uint32(data[4*i:])&0xffff0000)
	}
	return out
}

// TestBF16GainsAsF32 checks that gains stored as BF16, held at 2 bytes an element and widened
// where they are used, give the logits the same values stored as F32 give, mapped and under a
// budget, and that the plan charges 2 bytes an element less for them.
func TestBF16GainsAsF32(t *testing.T) {
	src := synthTiny(t, 7)
	f32Dir, n := gainsAs(t, src, safetensors.F32)
	bf16Dir, _ := gainsAs(t, src, safetensors.BF16)
	prompt := []int{3, 141, 59, 26, 5, 35, 89, 79}
	logits := func(dir string, opts ...k3.Option) ([][]float32, *k3.Plan) {
		m := openModel(t, dir, opts...)
		s := m.NewSession()
		rows, err := s.PrefillAll(context.Background(), prompt)
		require.NoError(t, err)
		p := m.Plan()
		return rows, &p
	}
	for _, tc := range []struct {
		name string
		opts []k3.Option
	}{{"mapped", nil}, {"budget", []k3.Option{k3.WithTrunkBudget(1 << 30)}}} {
		t.Run(tc.name, func(t *testing.T) {
			want, pf := logits(f32Dir, tc.opts...)
			got, pb := logits(bf16Dir, tc.opts...)
			require.Len(t, got, len(want))
			for i := range want {
				require.NotEmpty(t, want[i])
				require.Equal(t, f32bits(want[i]), f32bits(got[i]), "position %d", i)
			}
			if pf.Trunk != nil {
				require.Equal(t, pf.Trunk.SideBytes-2*n, pb.Trunk.SideBytes, "side bytes of %d BF16 gain elements", n)
			}
		})
	}
	// The values must matter: the cut gains give other logits than the originals.
	orig, _ := logits(src)
	cut, _ := logits(f32Dir)
	require.NotEqual(t, f32bits(orig[len(orig)-1]), f32bits(cut[len(cut)-1]))
}
