package safetensors

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseHeaderStrict(t *testing.T) {
	ent := func(name string) string {
		return `"` + name + `": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}`
	}
	cases := []struct {
		hdr     string
		dataLen int64
		want    error // nil = accepted
		name    string
	}{
		{`{}`, 0, nil, ""},
		{"\t\n {}   ", 0, nil, ""},
		{`{}`, 1, ErrTrailingBytes, ""},
		{"{}\t", 0, nil, ""},
		{"{}\n", 0, nil, ""},
		{"{}\r\n \t", 0, nil, ""},
		{"{}\f", 0, ErrTrailingGarbage, ""},
		{"{}\x00", 0, ErrTrailingGarbage, ""},
		{`{} {}`, 0, ErrTrailingGarbage, ""},
		{``, 0, ErrHeaderTooSmall, ""},
		{` `, 0, ErrHeaderTooSmall, ""},
		{`  `, 0, ErrNotObject, ""},
		{`[]`, 0, ErrNotObject, ""},
		{`{` + ent("a") + `}`, 2, nil, "a"},
		{`{` + ent(`\ud83d\ude00`) + `}`, 2, nil, "\U0001F600"},
		{`{` + ent(`a\u0000b`) + `}`, 2, nil, "a\x00b"},
		{`{` + ent(`tab\tq\"s\\l\/`) + `}`, 2, nil, "tab\tq\"s\\l/"},
		{`{` + ent(`\ude00`) + `}`, 2, ErrLoneSurrogate, ""},
		{`{` + ent(`\ud83d`) + `}`, 2, ErrLoneSurrogate, ""},
		{`{` + ent(`\ud83d\u0041`) + `}`, 2, ErrLoneSurrogate, ""},
		{`{` + ent(`\u12`) + `}`, 2, ErrInvalidEscape, ""},
		{`{` + ent(`\U0041`) + `}`, 2, ErrInvalidEscape, ""},
		{`{` + ent("a\x01") + `}`, 2, ErrSyntax, ""},
		{`{` + ent("a") + `,}`, 2, ErrSyntax, ""},
		{`{,` + ent("a") + `}`, 2, ErrSyntax, ""},
		{`{` + ent("a") + ` ` + ent("b") + `}`, 2, ErrSyntax, ""},
		{`{` + ent("a"), 2, ErrSyntax, ""},
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2],}}`, 2, ErrSyntax, ""},
		{`{"a": {"dtype": "U8", "shape": [02], "data_offsets": [0, 2]}}`, 2, ErrBadInteger, "a"},
		{`{"a": {"dtype": "U8", "shape": [2e0], "data_offsets": [0, 2]}}`, 2, ErrBadInteger, "a"},
		{`{"a": {"dtype": "U8", "shape": [Infinity], "data_offsets": [0, 2]}}`, 2, ErrBadShape, "a"},
		{`{"a": {"dtype": "U8", "shape": ["2"], "data_offsets": [0, 2]}}`, 2, ErrBadShape, "a"},
		{`{"a": {"dtype": "U8", "shape": 2, "data_offsets": [0, 2]}}`, 2, ErrBadShape, "a"},
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0]}}`, 2, ErrBadOffsets, "a"},
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": []}}`, 2, ErrBadOffsets, "a"},
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 9223372036854775808]}}`, 2, ErrIntegerOverflow, "a"},
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 9223372036854775807]}}`, 2, ErrSizeMismatch, "a"},
		{`{"a": {"dtype": 8, "shape": [2], "data_offsets": [0, 2]}}`, 2, ErrUnknownDType, "a"},
		{`{"a": {"dtype": "u8", "shape": [2], "data_offsets": [0, 2]}}`, 2, ErrUnknownDType, "a"},
		{`{"a": {"dtype": "U\u0038", "shape": [2], "data_offsets": [0, 2]}}`, 2, nil, "a"},
		{`{"a": {}}`, 0, ErrMissingField, "a"},
		{`{"a": null}`, 0, ErrEntryNotObject, "a"},
		{`{"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}}`, 1, ErrSubByteAlignment, "a"},
		{`{"a": {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]}}`, 2, nil, "a"},
		{`{"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 2]}}`, 2, ErrNumelOverflow, "a"},
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "b": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]}}`, 2, nil, "a"},
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "b": {"dtype": "U8", "shape": [0], "data_offsets": [1, 1]}}`, 2, ErrOverlap, "b"},
		{`{"b": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}, "a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}`, 2, nil, "a"},
		// The same entry twice overlaps itself; the duplicate name is the fault.
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}`, 2, ErrDuplicateKey, "a"},
		{`{"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "\u0061": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}`, 2, ErrDuplicateKey, "a"},
		{`{"__metadata__": {}, "__metadata__": {}}`, 0, ErrDuplicateKey, ""},
		{`{"__metadata__": {"k": "1", "k": "2"}}`, 0, ErrDuplicateKey, "__metadata__"},
		{`{"__metadata__": {"k": null}}`, 0, ErrMetadataValue, "__metadata__"},
		{`{"__metadata__": {"k": {"x": "y"}}}`, 0, ErrMetadataValue, "__metadata__"},
		{`{"__metadata__": "x"}`, 0, ErrMetadataNotObject, "__metadata__"},
		{"{\"a\xc3\": 1}", 0, ErrInvalidUTF8, ""},
	}
	for i, c := range cases {
		h, err := ParseHeader("h", []byte(c.hdr), c.dataLen)
		if c.want == nil {
			if err != nil {
				t.Errorf("%d %q: %v", i, c.hdr, err)
				continue
			}
			if c.name != "" && (len(h.Tensors) == 0 || h.Tensors[0].Name != c.name) {
				t.Errorf("%d %q: tensors %v", i, c.hdr, h.Tensors)
			}
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%d %q: got %v, want %v", i, c.hdr, err, c.want)
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.File != "h" || (c.name != "" && e.Tensor != c.name) {
			t.Errorf("%d %q: error %#v lacks file/tensor %q", i, c.hdr, e, c.name)
		}
	}
	if _, err := ParseHeader("h", []byte("{"+strings.Repeat(" ", MaxHeaderSize)+"}"), 0); !errors.Is(err, ErrHeaderTooLarge) {
		t.Errorf("huge header: %v", err)
	}
}

func TestParseHeaderOffsets(t *testing.T) {
	hdr := []byte(`{"__metadata__": {"k": "v\u00e9"}, "y": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [4, 8]}, "x": {"shape": [], "data_offsets": [0, 4], "dtype": "F32"}}`)
	h, err := ParseHeader("h", hdr, 8)
	if err != nil {
		t.Fatal(err)
	}
	if h.Metadata["k"] != "vé" || len(h.Tensors) != 2 || h.DataOffset != 8+int64(len(hdr)) {
		t.Fatalf("%+v", h)
	}
	x, y := h.Tensors[0], h.Tensors[1]
	if x.Name != "x" || x.DType != F32 || len(x.Shape) != 0 || x.Offset != h.DataOffset || x.Size != 4 {
		t.Errorf("x = %v", &x)
	}
	if y.Name != "y" || y.DType != BF16 || len(y.Shape) != 2 || y.Shape[1] != 2 || y.Offset != h.DataOffset+4 || y.Size != 4 {
		t.Errorf("y = %v", &y)
	}
}

// hasSpecial may report false positives but never a false negative: every
// word holding '"', '\\' or a control byte must be flagged.
func TestHasSpecial(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	specials := []byte{'"', '\\', 0, 1, 0x1f}
	for n := 0; n < 200000; n++ {
		var b [8]byte
		for i := range b {
			b[i] = byte(0x20 + rng.IntN(0x5f)) // printable ASCII
			if b[i] == '"' || b[i] == '\\' {
				b[i] = 'a'
			}
		}
		w := binary.LittleEndian.Uint64(b[:])
		if hasSpecial(w) {
			t.Fatalf("false positive on plain ASCII %q", b)
		}
		k := rng.IntN(8)
		b[k] = specials[rng.IntN(len(specials))]
		if rng.IntN(2) == 0 {
			b[rng.IntN(8)] = byte(0x80 + rng.IntN(0x80)) // non-ASCII elsewhere
		}
		w = binary.LittleEndian.Uint64(b[:])
		if !hasSpecial(w) && (b[k] == '"' || b[k] == '\\' || b[k] < 0x20) {
			t.Fatalf("missed special in %q", b)
		}
	}
}
