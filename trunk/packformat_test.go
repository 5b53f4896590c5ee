package trunk

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/quant/lossless12"
)

// l12Source is source's layers plus, in each, a [8, 1] bf16 matrix (lossless12 would make it
// longer), an F32 vector and a [4, 32] bf16 tensor that is not a matrix (never encoded), as
// SourceTensors.
func l12Source(t *testing.T) [][]SourceTensor {
	t.Helper()
	path, ts := source(t, 2, 32, 16)
	st, err := os.Stat(path)
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 2*(16+64+256)))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	layers := make([][]SourceTensor, 2)
	for _, tt := range ts {
		if tt.Item < 0 {
			continue
		}
		layers[tt.Item] = append(layers[tt.Item], SourceTensor{Name: tt.Name, File: tt.File, Offset: tt.Offset, Size: tt.Size,
			DType: "BF16", Shape: []int64{int64(tt.Rows), int64(tt.Cols)}, Matrix: true})
	}
	for l := range 2 {
		base := st.Size() + int64(l)*(16+64+256)
		layers[l] = append(layers[l],
			SourceTensor{Name: "layers." + string(rune('0'+l)) + ".taps", File: path, Offset: base + 80, Size: 256, DType: "BF16", Shape: []int64{4, 32}},
			SourceTensor{Name: "layers." + string(rune('0'+l)) + ".narrow", File: path, Offset: base, Size: 16, DType: "BF16", Shape: []int64{8, 1}, Matrix: true},
			SourceTensor{Name: "layers." + string(rune('0'+l)) + ".norm", File: path, Offset: base + 16, Size: 64, DType: "F32", Shape: []int64{16}})
	}
	return layers
}

// TestPackLossless12: a lossless12 pack encodes every bf16 matrix that shrinks, keeps the others
// (recorded as bf16 or, not being matrices, as before), and every encoded tensor opens to the
// source's bf16 bytes; a bf16 pack's trunk.json has no format fields, as before; an unknown
// format is refused.
func TestPackLossless12(t *testing.T) {
	layers := l12Source(t)
	dir := t.TempDir()
	_, err := Pack(dir, layers, PackOptions{Format: FormatLossless12})
	require.NoError(t, err)
	l, err := ReadLayout(dir, 2, Expect{})
	require.NoError(t, err)
	bin, err := os.ReadFile(filepath.Join(dir, BinName))
	require.NoError(t, err)
	formats := map[string]string{}
	for i, r := range l.Layers {
		for _, rt := range r.Tensors {
			formats[rt.Name] = rt.Format
			var src SourceTensor
			for _, s := range layers[i] {
				if s.Name == rt.Name {
					src = s
				}
			}
			raw, err := os.ReadFile(src.File)
			require.NoError(t, err)
			want := raw[src.Offset : src.Offset+src.Size]
			got := bin[r.FileOff+rt.Off : r.FileOff+rt.Off+rt.NBytes]
			if rt.Format != FormatLossless12 {
				assert.Equal(t, want, got, rt.Name)
				continue
			}
			assert.Equal(t, "U8", rt.DType)
			m, err := lossless12.Open(got)
			require.NoError(t, err, rt.Name)
			assert.Equal(t, rt.Escapes, m.Header().Escapes)
			row := make([]byte, 2*m.Cols())
			for k := range m.Rows() {
				m.DecodeRowBF16(row, k)
				require.Equal(t, want[k*len(row):(k+1)*len(row)], row, "%s row %d", rt.Name, k)
			}
		}
	}
	assert.Equal(t, map[string]string{"layers.0.a": FormatLossless12, "layers.0.b": FormatLossless12, "layers.0.narrow": FormatBF16,
		"layers.0.norm": "", "layers.0.taps": "", "layers.1.a": FormatLossless12, "layers.1.b": FormatLossless12,
		"layers.1.narrow": FormatBF16, "layers.1.norm": "", "layers.1.taps": ""}, formats)

	plain := t.TempDir()
	_, err = Pack(plain, layers, PackOptions{})
	require.NoError(t, err)
	js, err := os.ReadFile(filepath.Join(plain, LayoutName))
	require.NoError(t, err)
	assert.NotContains(t, string(js), `"format"`)
	assert.NotContains(t, string(js), `"escapes"`)

	_, err = Pack(t.TempDir(), layers, PackOptions{Format: "zstd"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"zstd"`)
}

// TestLayoutFormatViolations: the format fields are checked against the dtype, the shape and
// nbytes, and refused with ErrLayout.
func TestLayoutFormatViolations(t *testing.T) {
	dir := t.TempDir()
	_, err := Pack(dir, l12Source(t), PackOptions{Format: FormatLossless12})
	require.NoError(t, err)
	good, binSize := goodLayout(t, dir)
	tensor := func(d map[string]any, name string) map[string]any {
		return d["layers"].([]any)[0].(map[string]any)["tensors"].(map[string]any)[name].(map[string]any)
	}
	cases := []layoutViolation{
		{"unknown format", func(d map[string]any) { tensor(d, "layers.0.a")["format"] = "lossless11" }, `"lossless11" is not`},
		{"format not a string", func(d map[string]any) { tensor(d, "layers.0.a")["format"] = 12 }, "format"},
		{"escapes missing", func(d map[string]any) { delete(tensor(d, "layers.0.a"), "escapes") }, "without escapes"},
		{"escapes wrong", func(d map[string]any) {
			tensor(d, "layers.0.a")["escapes"] = tensor(d, "layers.0.a")["escapes"].(float64) + 1
		}, "escape bytes a row needs"},
		{"escapes negative", func(d map[string]any) { tensor(d, "layers.0.a")["escapes"] = -1 }, "escapes must be"},
		{"escapes past cols", func(d map[string]any) { tensor(d, "layers.0.a")["escapes"] = 17 }, "escapes must be"},
		{"lossless12 not U8", func(d map[string]any) { tensor(d, "layers.0.a")["dtype"] = "BF16" }, "want U8"},
		{"lossless12 1-D", func(d map[string]any) {
			a := tensor(d, "layers.0.a")
			a["shape"] = []any{a["nbytes"]}
		}, "[rows, cols]"},
		{"bf16 on F32", func(d map[string]any) { tensor(d, "layers.0.norm")["format"] = FormatBF16 }, "format bf16 on a F32 tensor"},
		{"escapes on bf16", func(d map[string]any) { tensor(d, "layers.0.narrow")["escapes"] = 0 }, "escapes on a bf16 tensor"},
		{"escapes without format", func(d map[string]any) { tensor(d, "layers.0.norm")["escapes"] = 0 }, "escapes without a format"},
		{"format dropped", func(d map[string]any) {
			delete(tensor(d, "layers.0.a"), "format")
			delete(tensor(d, "layers.0.a"), "escapes")
		}, "needs"},
	}
	requireViolations(t, good, binSize, cases)
}

// TestLossless12Seed: the fuzz seed with format fields is a valid trunk.json, read with the
// fields it names.
func TestLossless12Seed(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "trunk-lossless12.json"))
	require.NoError(t, err)
	l, err := ParseLayout(data, 8192, 2, Expect{})
	require.NoError(t, err)
	got := map[string][2]any{}
	for _, r := range l.Layers {
		for _, rt := range r.Tensors {
			got[rt.Name] = [2]any{rt.Format, rt.Escapes}
		}
	}
	assert.Equal(t, map[string][2]any{"layers.0.a": {FormatLossless12, 0}, "layers.0.b": {FormatBF16, 0},
		"layers.0.c": {"", 0}, "layers.1.a": {FormatLossless12, 1}}, got)
}

// layoutViolation is a change to a valid trunk.json that ParseLayout must refuse with ErrLayout
// and a message containing want.
type layoutViolation struct {
	name   string
	mutate func(d map[string]any)
	want   string
}

// requireViolations applies each case to a copy of good and requires its refusal.
func requireViolations(t *testing.T, good []byte, binSize int64, cases []layoutViolation) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d map[string]any
			require.NoError(t, json.Unmarshal(good, &d))
			c.mutate(d)
			data, err := json.Marshal(d)
			require.NoError(t, err)
			_, err = ParseLayout(data, binSize, 2, Expect{})
			require.ErrorIs(t, err, ErrLayout)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
