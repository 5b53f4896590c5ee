package safetensors

import (
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/k3-project/k3/internal/testkit/faultfs"
)

func TestVerifyTensor(t *testing.T) {
	ts := []WriteTensor{
		{Name: "a", DType: U8, Shape: []int64{10 << 20}, Data: make([]byte, 10<<20)}, // > one chunk
		{Name: "b", DType: F32, Shape: []int64{3}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{Name: "c", DType: U8, Shape: []int64{0}},
	}
	ts[0].Data[5<<20] = 9
	sums, err := ChecksumMetadata(ts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := WriteFile(path, ts, map[string]string{ChecksumKey: sums}); err != nil {
		t.Fatal(err)
	}

	ck, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range ck.Tensors() {
		checked, err := ck.VerifyTensor(tt)
		if !checked {
			t.Errorf("%s: not checked", tt.Name)
		}
		if err != nil {
			t.Errorf("%v: %v", tt.Name, err)
		}
	}
	ck.Close()

	// Every flipped bit in a's or b's data is caught, naming the tensor.
	for _, tc := range []struct {
		name string
		at   int64
	}{{"a", 0}, {"a", 9 << 20}, {"b", 11}} {
		x := faultfs.New()
		ck := openFaulty(t, path, x)
		tt, _ := ck.Tensor(tc.name)
		x.Flip("m.safetensors", tt.Offset+tc.at, 6)
		checked, err := ck.VerifyTensor(tt)
		if !checked {
			t.Error("not checked")
		}
		if !errors.Is(err, ErrChecksum) {
			t.Fatalf("got %v, want %v", err, ErrChecksum)
		}
		if !strings.Contains(err.Error(), `"`+tc.name+`"`) {
			t.Errorf("%q does not contain %q", err.Error(), `"`+tc.name+`"`)
		}
	}

	// Without the key nothing is checked; a malformed key is refused.
	if err := WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	ck, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tt, _ := ck.Tensor("b")
	checked, err := ck.VerifyTensor(tt)
	if checked {
		t.Error("checked without a checksum")
	}
	if err != nil {
		t.Error(err)
	}
	ck.Close()
	for _, bad := range []string{`[]`, `{"b":"00"}`, `{"b":1}`, `{"b":"` + string(make([]byte, 64)) + `"}`,
		`{"b":"ABCDEF0000000000000000000000000000000000000000000000000000000000"}`, `{"b":"x","b":"y"}`} {
		if err := WriteFile(path, ts, map[string]string{ChecksumKey: bad}); err != nil {
			t.Fatal(err)
		}
		ck, err = Open(path)
		if err != nil {
			t.Fatal(err)
		}
		tt, _ := ck.Tensor("b")
		_, err = ck.VerifyTensor(tt)
		if !errors.Is(err, ErrChecksumFormat) {
			t.Errorf("%s: got %v, want %v", bad, err, ErrChecksumFormat)
		}
		ck.Close()
	}
}

// FuzzChecksums: any colibri.sha256 text either parses into digests that
// re-encode to 64 lower-case hex digits each, or is refused; never a panic.
func FuzzChecksums(f *testing.F) {
	f.Add(`{"a":"` + strings.Repeat("0f", 32) + `"}`)
	f.Add(`{}`)
	f.Add(`{"a":"` + strings.Repeat("0F", 32) + `"}`)
	f.Add(`{"a\ud800":"` + strings.Repeat("00", 32) + `"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, text string) {
		m, err := parseChecksums(text)
		if err != nil {
			return
		}
		for k, v := range m {
			if s := hex.EncodeToString(v[:]); !strings.Contains(text, s) {
				t.Fatalf("entry %q: digest %s not in the text", k, s)
			}
		}
	})
}
