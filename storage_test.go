package k3_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fixtures "github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/safetensors"
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

// TestStorageEquivalence (E1, SPEC §5.6): the same values stored as F32 or as BF16, and the
// accepted alternative shapes (conv [P,K], res_proj [E], A_log [H]), give bit-identical logits;
// a BF16 matrix stored as exactly widened F32 does too; extra non-text tensors are ignored.
func TestStorageEquivalence(t *testing.T) {
	src := filepath.Join(fixtures.Path(t, "models"), "tiny")
	ref := loadReference(t, src)
	ck, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m0 := openModel(t, src)
	H := m0.Config().KDAHeads
	var a, b []safetensors.WriteTensor
	for _, tt := range ck.Tensors() {
		data, err := ck.Read(tt)
		if err != nil {
			t.Fatal(err)
		}
		wa := safetensors.WriteTensor{Name: tt.Name, DType: tt.DType, Shape: tt.Shape, Data: data}
		wb := wa
		switch {
		case tt.DType == safetensors.F32:
			v, err := ck.ReadF32(tt)
			if err != nil {
				t.Fatal(err)
			}
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
		case tt.Name == "language_model.lm_head.weight":
			v, err := ck.ReadF32(tt)
			if err != nil {
				t.Fatal(err)
			}
			wb.DType, wb.Data = safetensors.F32, f32Bytes(v)
		}
		a, b = append(a, wa), append(b, wb)
	}
	// Tensors outside the text model (vision tower, projector) are ignored by the binder.
	b = append(b,
		safetensors.WriteTensor{Name: "vision_tower.encoder.blocks.0.attn.qkv.weight", DType: safetensors.F32, Shape: []int64{2, 2}, Data: f32Bytes([]float32{1, 2, 3, 4})},
		safetensors.WriteTensor{Name: "mm_projector.proj.0.weight", DType: safetensors.U8, Shape: []int64{3}, Data: []byte{1, 2, 3}})
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var logits [2][][]float32
	for i, ts := range [][]safetensors.WriteTensor{a, b} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
			t.Fatal(err)
		}
		m := openModel(t, dir)
		if logits[i], err = m.Forward(context.Background(), ref.FullIDs); err != nil {
			t.Fatal(err)
		}
	}
	for p := range logits[0] {
		if !sameBits(logits[0][p], logits[1][p]) {
			t.Fatalf("position %d: F32 and BF16 storage of the same values give different logits", p)
		}
	}
	// The rounded model is a different model; it must still be a sane one.
	if d := digest(logits[0]); d == 0 {
		t.Error("empty digest")
	}
}
