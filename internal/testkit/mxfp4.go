package testkit

import (
	"encoding/json"
	"os"
	"testing"
)

// MXFP4Sample is shared/fixtures/mxfp4.json (§13.3): the real bytes of
// the first 64 rows of a released K3 expert matrix and the oracle's
// dequantization of them.
type MXFP4Sample struct {
	Source       string    `json:"source"`
	GroupSize    int       `json:"group_size"`
	LogicalWidth int       `json:"logical_width"`
	Rows         int       `json:"rows"`
	PackedCols   int       `json:"packed_cols"`
	ScaleCols    int       `json:"scale_cols"`
	LUT          []float64 `json:"e2m1_lut"`
	Packed       struct {
		Shape []int `json:"shape"`
		Ints  []int `json:"data"`
	} `json:"packed"`
	Scales struct {
		Shape []int `json:"shape"`
		Ints  []int `json:"data"`
	} `json:"scales"`
	Expected struct {
		Shape []int     `json:"shape"`
		Data  []float64 `json:"data"`
	} `json:"expected"`
	Swapped struct {
		First64 []float64 `json:"first64"`
	} `json:"expected_swapped_nibbles"`

	// PackedBytes and ScaleBytes are Packed and Scales as the bytes a
	// shard holds (the JSON stores them as numbers).
	PackedBytes, ScaleBytes []byte
}

// MXFP4 loads the MXFP4 sample, skipping (or failing under CI) when the
// fixtures are missing and failing the test when a stored byte is not one.
func MXFP4(tb testing.TB) *MXFP4Sample {
	tb.Helper()
	raw, err := os.ReadFile(Path(tb, "mxfp4.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var f MXFP4Sample
	if err := json.Unmarshal(raw, &f); err != nil {
		tb.Fatalf("mxfp4.json: %v", err)
	}
	toBytes := func(what string, v []int) []byte {
		b := make([]byte, len(v))
		for i, x := range v {
			if x < 0 || x > 255 {
				tb.Fatalf("mxfp4.json: %s[%d] = %d is not a byte", what, i, x)
			}
			b[i] = byte(x)
		}
		return b
	}
	f.PackedBytes, f.ScaleBytes = toBytes("packed", f.Packed.Ints), toBytes("scales", f.Scales.Ints)
	return &f
}
