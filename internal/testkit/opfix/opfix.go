package opfix

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
)

// Tensor is one fixture tensor: row-major data and its shape.
type Tensor struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// F32 returns the data rounded to float32.
func (t *Tensor) F32() []float32 {
	out := make([]float32, len(t.Data))
	for i, v := range t.Data {
		out[i] = float32(v)
	}
	return out
}

// Fixture is one parsed ops/*.json file.
type Fixture struct {
	Name string
	Tol  Tolerance // the tolerance of ops/MANIFEST.json, for Compare
	raw  map[string]json.RawMessage
	tb   testing.TB
}

// Tolerance is the elementwise bound |a−b| ≤ Abs + Rel·|b|.
type Tolerance struct {
	Abs float64 `json:"fp32_abs"`
	Rel float64 `json:"fp32_rel"`
}

// Manifest returns the tolerance stored in ops/MANIFEST.json; it fails the
// test if it is missing or not positive (tolerances are never defaulted).
func Manifest(tb testing.TB) Tolerance {
	tb.Helper()
	var m struct {
		Tolerance *Tolerance `json:"tolerance"`
	}
	data, err := os.ReadFile(testkit.Path(tb, "ops/MANIFEST.json"))
	if err != nil {
		tb.Fatalf("opfix: %v", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatalf("opfix: MANIFEST.json: %v", err)
	}
	if m.Tolerance == nil || m.Tolerance.Abs <= 0 || m.Tolerance.Rel <= 0 {
		tb.Fatalf("opfix: MANIFEST.json has no usable tolerance")
	}
	return *m.Tolerance
}

// Files lists every ops/*.json fixture except MANIFEST.json, sorted.
func Files(tb testing.TB) []string {
	tb.Helper()
	entries, err := os.ReadDir(testkit.Path(tb, "ops"))
	if err != nil {
		tb.Fatalf("opfix: %v", err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".json") && n != "MANIFEST.json" {
			names = append(names, strings.TrimSuffix(n, ".json"))
		}
	}
	sort.Strings(names)
	return names
}

// Load parses ops/<name>.json, with the tolerance its values are compared
// at.
func Load(tb testing.TB, name string) *Fixture {
	tb.Helper()
	tol := Manifest(tb)
	data, err := os.ReadFile(testkit.Path(tb, "ops/"+name+".json"))
	if err != nil {
		tb.Fatalf("opfix: %v", err)
	}
	f := &Fixture{Name: name, Tol: tol, tb: tb}
	if err := json.Unmarshal(data, &f.raw); err != nil {
		tb.Fatalf("opfix: %s: %v", name, err)
	}
	return f
}

// Has reports whether the fixture has key.
func (f *Fixture) Has(key string) bool { _, ok := f.raw[key]; return ok }

// Tensor returns the tensor under key, failing the test if absent.
func (f *Fixture) Tensor(key string, shape ...int) *Tensor {
	f.tb.Helper()
	raw, ok := f.raw[key]
	if !ok {
		f.tb.Fatalf("opfix: %s: no key %q", f.Name, key)
	}
	var t Tensor
	if err := json.Unmarshal(raw, &t); err != nil || t.Shape == nil {
		f.tb.Fatalf("opfix: %s: %q is not a tensor: %v", f.Name, key, err)
	}
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	if n != len(t.Data) {
		f.tb.Fatalf("opfix: %s: %q shape %v but %d values", f.Name, key, t.Shape, len(t.Data))
	}
	if len(shape) > 0 && fmt.Sprint(shape) != fmt.Sprint(t.Shape) {
		f.tb.Fatalf("opfix: %s: %q has shape %v, want %v", f.Name, key, t.Shape, shape)
	}
	return &t
}

// F32 returns the tensor under key as float32 (optionally checking its shape).
func (f *Fixture) F32(key string, shape ...int) []float32 {
	f.tb.Helper()
	return f.Tensor(key, shape...).F32()
}

// Matrix returns the tensor under key, of shape rows×cols, as an f32
// matrix: the layers' fixtures bind their weights unquantized.
func (f *Fixture) Matrix(key string, rows, cols int) quant.Matrix {
	f.tb.Helper()
	return Matrix(f.tb, f.F32(key, rows, cols), rows, cols)
}

// Matrix returns w (row-major, rows×cols) as an f32 matrix, failing the test
// when the sizes disagree.
func Matrix(tb testing.TB, w []float32, rows, cols int) quant.Matrix {
	tb.Helper()
	m, err := quant.F32FromFloats(rows, cols, w)
	if err != nil {
		tb.Fatalf("opfix: %v", err)
	}
	return m
}

// BF16 returns w (row-major, rows×cols) rounded to a bf16 matrix, the
// trunk's format in the released checkpoint.
func BF16(tb testing.TB, w []float32, rows, cols int) quant.Matrix {
	tb.Helper()
	data, _, err := quant.Quantize(quant.BF16, w, rows, cols, 0)
	if err != nil {
		tb.Fatalf("opfix: %v", err)
	}
	m, err := quant.NewBF16(rows, cols, data)
	if err != nil {
		tb.Fatalf("opfix: %v", err)
	}
	return m
}

// Scalar returns the number under key.
func (f *Fixture) Scalar(key string) float64 {
	f.tb.Helper()
	raw, ok := f.raw[key]
	if !ok {
		f.tb.Fatalf("opfix: %s: no key %q", f.Name, key)
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil {
		var b bool
		if err2 := json.Unmarshal(raw, &b); err2 != nil {
			f.tb.Fatalf("opfix: %s: %q is not a number: %v", f.Name, key, err)
		}
		if b {
			v = 1
		}
	}
	return v
}

// Int returns the integer under key.
func (f *Fixture) Int(key string) int {
	f.tb.Helper()
	v := f.Scalar(key)
	if v != math.Trunc(v) {
		f.tb.Fatalf("opfix: %s: %q = %v is not an integer", f.Name, key, v)
	}
	return int(v)
}

// Compare checks got against want elementwise at the manifest tolerance and
// returns the largest |a−b| / (Abs + Rel·|b|) ratio (≤ 1 passes). It fails
// the test (naming the first offending index) on a length mismatch, a NaN,
// or any element above tolerance.
func Compare(tb testing.TB, tol Tolerance, what string, got []float32, want []float32) float64 {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	bad := 0
	for i := range got {
		a, b := float64(got[i]), float64(want[i])
		if math.IsNaN(a) || math.IsInf(a, 0) {
			tb.Fatalf("%s[%d] = %v, want %v", what, i, a, b)
		}
		r := math.Abs(a-b) / (tol.Abs + tol.Rel*math.Abs(b))
		if r > worst {
			worst, at = r, i
		}
		if r > 1 {
			if bad < 5 {
				tb.Errorf("%s[%d] = %.9g, want %.9g (|Δ| = %.3g, %.3f × tolerance)", what, i, a, b, math.Abs(a-b), r)
			}
			bad++
		}
	}
	if bad > 0 {
		tb.Errorf("%s: %d of %d values above tolerance (worst index %d)", what, bad, len(got), at)
	}
	tb.Logf("%s: max error/tolerance = %.4f over %d values", what, worst, len(got))
	return worst
}

// Config returns the flat tiny-model config stored in ops/MANIFEST.json
// (§13.1), as parsed JSON values.
func Config(tb testing.TB) map[string]any {
	tb.Helper()
	var m struct {
		Config map[string]any `json:"config"`
	}
	data, err := os.ReadFile(testkit.Path(tb, "ops/MANIFEST.json"))
	if err != nil {
		tb.Fatalf("opfix: %v", err)
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Config == nil {
		tb.Fatalf("opfix: MANIFEST.json has no config: %v", err)
	}
	return m.Config
}

// ConfigNum returns the numeric (or boolean, as 0/1) config entry key of
// MANIFEST.json, failing the test if it is absent.
func ConfigNum(tb testing.TB, cfg map[string]any, key string) float64 {
	tb.Helper()
	switch v := cfg[key].(type) {
	case float64:
		return v
	case bool:
		if v {
			return 1
		}
		return 0
	}
	tb.Fatalf("opfix: MANIFEST.json config has no number %q", key)
	return 0
}
