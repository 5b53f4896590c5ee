package quant

import (
	"math"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
)

// TestMXFP4Fixture wraps real K3 MXFP4 bytes (§13.3 mxfp4.json) as a
// quant.Matrix: DecodeRow reproduces the oracle's dequantised values bit for
// bit, and MatVec equals the reference RG sum over the bytes.
func TestMXFP4Fixture(t *testing.T) {
	fx := testkit.MXFP4(t)
	packed, scales := fx.PackedBytes, fx.ScaleBytes
	f, gs, err := Resolve("layers.1.experts.0.w1", fx.Rows, fx.LogicalWidth, TensorDesc{"U8", int64(len(packed))},
		&TensorDesc{"F8_E8M0", int64(len(scales))}, "")
	if err != nil || f != MXFP4 {
		t.Fatalf("Resolve: %v %v", f, err)
	}
	m, err := New(f, fx.Rows, fx.LogicalWidth, gs, packed, scales)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]float32, fx.Rows*fx.LogicalWidth)
	if err := Dequantize(all, m); err != nil {
		t.Fatal(err)
	}
	for i, v := range all {
		if math.Float32bits(v) != math.Float32bits(float32(fx.Expected.Data[i])) {
			t.Fatalf("element %d = %v, oracle %v", i, v, fx.Expected.Data[i])
		}
	}
	x := make([]float32, fx.LogicalWidth)
	for i := range x {
		x[i] = float32(math.Sin(float64(i))) * 3
	}
	got := make([]float32, fx.Rows)
	MatVecParallel(m, got, x, 2)
	testkit.RequireSameBitsOrNaN(t, "fixture MatVec", got, refMatVec(MXFP4, fx.Rows, fx.LogicalWidth, 0, packed, scales, x))
}
