package k3_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bf16Bytes(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(x)>>16))
	}
	return b
}

// truncBF16 rounds toward zero to a bfloat16 value, so that BF16 storage of the result is exact.
func truncBF16(v []float32) {
	for i, x := range v {
		v[i] = math.Float32frombits(math.Float32bits(x) &^ 0xffff)
	}
}

// TestStorageEquivalence (E1, §5.6): the same values stored as F32 or as BF16, and the
// accepted alternative shapes (conv [P,K], res_proj [E], A_log [H]), give bit-identical logits;
// a BF16 matrix stored as exactly widened F32 does too; extra non-text tensors are ignored.
func TestStorageEquivalence(t *testing.T) {
	src := filepath.Join(testkit.Path(t, "models"), "tiny")
	ref := testkit.LoadReference(t, src)
	ck, err := safetensors.Open(src)
	require.NoError(t, err)
	defer ck.Close()
	m0 := openModel(t, src)
	H := m0.Config().KDAHeads
	var a, b []safetensors.WriteTensor
	for _, tt := range ck.Tensors() {
		data, err := ck.Read(tt)
		require.NoError(t, err)
		wa := safetensors.WriteTensor{Name: tt.Name, DType: tt.DType, Shape: tt.Shape, Data: data}
		wb := wa
		switch {
		case tt.DType == safetensors.F32:
			v, err := ck.ReadF32(tt)
			require.NoError(t, err)
			truncBF16(v)
			wa.Data = f32Bytes(v)
			wb.DType, wb.Data = safetensors.BF16, bf16Bytes(v)
			switch {
			case strings.HasSuffix(tt.Name, "_conv1d.weight"):
				wb.Shape = []int64{tt.Shape[0], tt.Shape[2]}
			case strings.HasSuffix(tt.Name, "res_proj.weight"):
				wb.Shape = []int64{tt.Shape[1]}
			case strings.HasSuffix(tt.Name, ".A_log"):
				wb.Shape, wb.Data = []int64{int64(H)}, bf16Bytes(v[:H])
			}
		case tt.Name == layout.HeadName:
			v, err := ck.ReadF32(tt)
			require.NoError(t, err)
			wb.DType, wb.Data = safetensors.F32, f32Bytes(v)
		}
		a, b = append(a, wa), append(b, wb)
	}
	// Tensors outside the text model (vision tower, projector) are ignored by the binder.
	b = append(b,
		safetensors.WriteTensor{Name: "vision_tower.encoder.blocks.0.attn.qkv.weight", DType: safetensors.F32, Shape: []int64{2, 2}, Data: f32Bytes([]float32{1, 2, 3, 4})},
		safetensors.WriteTensor{Name: "mm_projector.proj.0.weight", DType: safetensors.U8, Shape: []int64{3}, Data: []byte{1, 2, 3}})
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	require.NoError(t, err)
	var logits [2][][]float32
	for i, ts := range [][]safetensors.WriteTensor{a, b} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644))
		require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil))
		m := openModel(t, dir)
		logits[i], err = m.Forward(context.Background(), ref.FullIDs)
		require.NoError(t, err)
	}
	for p := range logits[0] {
		require.True(t, testkit.SameBits(logits[0][p], logits[1][p]), "position %d: F32 and BF16 storage of the same values give different logits", p)
	}
	// The rounded model is a different model; it must still be a sane one.
	assert.NotZero(t, testkit.Digest(logits[0]...), "empty digest")
}
