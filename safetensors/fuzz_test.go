package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"slices"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds are headers shaped like the st fixtures (built by the writer,
// not copied) plus hand-made edge cases.
func fuzzSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	st := []WriteTensor{
		{Name: "plain.f32.2d", DType: F32, Shape: []int64{16, 16}},
		{Name: "plain.bf16.1d", DType: BF16, Shape: []int64{128}},
		{Name: "tricky.f16.1d", DType: F16, Shape: []int64{64}},
		{Name: "packed.u8.2d", DType: U8, Shape: []int64{7, 32}},
		{Name: "scalar.f32", DType: F32, Shape: []int64{}},
		{Name: "empty.f32", DType: F32, Shape: []int64{0, 8}},
		{Name: "language_model.model.layers.0.block_sparse_moe.experts.0.w1.weight_packed", DType: U8, Shape: []int64{2, 32}},
		{Name: "rank3.f32", DType: F32, Shape: []int64{2, 3, 4}},
		{Name: "rank4.u8", DType: U8, Shape: []int64{2, 2, 2, 2}},
		{Name: `weird\name."with"quotes`, DType: F32, Shape: []int64{3}},
		{Name: "f4", DType: F4, Shape: []int64{2}},
		{Name: "e8", DType: F8_E8M0, Shape: []int64{1, 1, 1, 1, 1, 1, 1, 1}},
	}
	var seeds [][]byte
	for _, ts := range [][]WriteTensor{st, st[:1], st[5:6], nil} {
		h, _, err := EncodeHeader(ts, map[string]string{"format": "pt", "note": "é \u2028"})
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, h)
	}
	for _, s := range []string{
		`{}`,
		`{"__metadata__": {}}`,
		`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}`,
		`{"\ud83d\ude00": {"shape": [1], "dtype": "I8", "data_offsets": [0, 1]}}  `,
		`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "\u0061": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]}}`,
		`{"a": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]}}`,
		"{\"a\": {\"dtype\": \"U8\", \"shape\": [18446744073709551615], \"data_offsets\": [0, 2]}}",
		`{"x": {"dtype": "C64", "shape": [1, 0, 9223372036854775807], "data_offsets": [0, 0]}}`,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

func FuzzHeader(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		h, err := ParseHeader("seed", s, dataLenOf(s))
		if err != nil {
			f.Logf("seed refused (kept as a negative seed): %v", err)
		}
		_ = h
		f.Add(s, uint32(dataLenOf(s)))
	}
	f.Fuzz(func(t *testing.T, hdr []byte, dataLen uint32) {
		h, err := ParseHeader("fuzz", hdr, int64(dataLen))
		// The same bytes as a file, read through the storage.File seam.
		file := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
		file = append(file, hdr...)
		if dataLen <= 1<<16 {
			file = append(file, make([]byte, dataLen)...)
			h2, _, err2 := readHeader("fuzz", memFile(file), seedForFuzz, true)
			if (err == nil) != (err2 == nil) {
				t.Fatalf("ParseHeader %v, readHeader %v", err, err2)
			}
			if err == nil && len(h2.entries) != len(h.Tensors) {
				t.Fatal("readHeader disagrees")
			}
		}
		if err != nil {
			var e *Error
			if !asError(err, &e) || e.Err == nil || e.File != "fuzz" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !utf8.Valid(hdr) || !json.Valid(hdr) {
			t.Fatalf("accepted a header that is not valid UTF-8 JSON: %q", hdr)
		}
		// The tensors tile the data section, each with a consistent size.
		pos := h.DataOffset
		seen := map[string]bool{}
		ws := make([]WriteTensor, len(h.Tensors))
		for i, tt := range h.Tensors {
			if tt.Offset != pos || tt.Name == "" || seen[tt.Name] || len(tt.Shape) > MaxRank {
				t.Fatalf("tensor %d %v: offset %d, want %d", i, &tt, tt.Offset, pos)
			}
			seen[tt.Name] = true
			_, nb, err := byteSize(tt.DType, tt.Shape)
			if err != nil || nb != tt.Size {
				t.Fatalf("%v: size %d vs %d (%v)", &tt, tt.Size, nb, err)
			}
			pos += tt.Size
			ws[i] = WriteTensor{Name: tt.Name, DType: tt.DType, Shape: tt.Shape}
		}
		if pos != h.DataOffset+int64(dataLen) {
			t.Fatalf("tensors end at %d, data ends at %d", pos, h.DataOffset+int64(dataLen))
		}
		// Writer round trip: re-encoding and re-parsing gives the same
		// tensors and metadata.
		enc, _, err := EncodeHeader(ws, h.Metadata)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		h3, err := ParseHeader("re", enc, int64(dataLen))
		if err != nil {
			t.Fatalf("re-parse: %v\n%q", err, enc)
		}
		if len(h3.Tensors) != len(h.Tensors) || !maps(h3.Metadata, h.Metadata) {
			t.Fatal("round trip changed the header")
		}
		for i := range h.Tensors {
			a, b := h.Tensors[i], h3.Tensors[i]
			if a.Name != b.Name || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || a.Size != b.Size || a.Offset-h.DataOffset != b.Offset-h3.DataOffset {
				t.Fatalf("round trip: %v vs %v", &a, &b)
			}
		}
	})
}

func FuzzIndex(f *testing.F) {
	f.Add([]byte(`{"metadata": {"total_size": 3}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b\u00e9": "x.safetensors"}}` + "\n"))
	f.Add([]byte(`{"weight_map": {}, "other": [1, {"x": null}, true, -1.5e3]}`))
	f.Add([]byte(`{"weight_map": {"a": "../x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		wm, total, err := ParseIndex(b)
		if err != nil {
			var e *Error
			if !asError(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if total < -1 {
			t.Fatalf("total %d", total)
		}
		for k, v := range wm {
			if k == "" || !plainName(v) {
				t.Fatalf("entry %q -> %q", k, v)
			}
		}
	})
}

var seedForFuzz = mustSeed()

// dataLenOf reads the data length a seed header implies: the largest end
// offset, found with the package's own parser given a generous bound.
func dataLenOf(hdr []byte) int64 {
	var max int64
	for i := 0; i+len(`"data_offsets":`) < len(hdr); i++ {
		if !bytes.HasPrefix(hdr[i:], []byte(`"data_offsets"`)) {
			continue
		}
		var v [2]int64
		j := bytes.IndexByte(hdr[i:], '[')
		k := bytes.IndexByte(hdr[i:], ']')
		if j < 0 || k < j {
			continue
		}
		if json.Unmarshal(hdr[i+j:i+k+1], &v) == nil && v[1] > max {
			max = v[1]
		}
	}
	return max
}

type memFile []byte

func (m memFile) ReadAt(p []byte, off int64) (int, error) { return bytes.NewReader(m).ReadAt(p, off) }
func (m memFile) Close() error                            { return nil }
func (m memFile) Stat() (fs.FileInfo, error)              { return fakeInfo{"mem", int64(len(m))}, nil }
