package quant

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseStamp(t *testing.T) {
	good := `{"a.weight":"mxfp4","b.weight":"int8-row","c":"no-such-format"}`
	m, err := ParseStamp("s1", good)
	if err != nil || len(m) != 3 || m["a.weight"] != "mxfp4" || m["c"] != "no-such-format" {
		t.Fatalf("ParseStamp(good) = %v, %v", m, err)
	}
	if m, err := ParseStamp("s1", " { } "); err != nil || len(m) != 0 {
		t.Fatalf("empty object: %v %v", m, err)
	}
	bad := map[string]string{
		"not json":        `mxfp4`,
		"empty":           ``,
		"array":           `["a","b"]`,
		"string":          `"a"`,
		"null":            `null`,
		"number value":    `{"a":7}`,
		"null value":      `{"a":null}`,
		"bool value":      `{"a":true}`,
		"object value":    `{"a":{"f":"mxfp4"}}`,
		"array value":     `{"a":["mxfp4"]}`,
		"duplicate key":   `{"a":"mxfp4","a":"mxfp4"}`,
		"duplicate key 2": `{"a":"mxfp4","b":"f32","a":"int8-row"}`,
		"trailing object": `{"a":"mxfp4"}{"b":"f32"}`,
		"trailing junk":   `{"a":"mxfp4"} x`,
		"unterminated":    `{"a":"mxfp4"`,
		"trailing comma":  `{"a":"mxfp4",}`,
		"invalid utf8":    "{\"a\xff\":\"mxfp4\"}",
		"lone surrogate":  `{"a\ud800":"mxfp4"}`,
		"lone low half":   `{"a":"mx\udc00fp4"}`,
		"escaped dup":     `{"a":"mxfp4","\u0061":"mxfp4"}`,
		"NaN value":       `{"a":NaN}`,
	}
	for name, text := range bad {
		_, err := ParseStamp("model-00002-of-00003.safetensors", text)
		var se *StampError
		if !errors.Is(err, ErrStamp) || !errors.As(err, &se) || !strings.Contains(err.Error(), "model-00002-of-00003.safetensors") {
			t.Errorf("%s: err = %v, want a *StampError naming the shard", name, err)
		}
	}
	// Entry limit: 4096 is fine, 4097 is refused.
	for _, n := range []int{MaxStampEntries, MaxStampEntries + 1} {
		obj := make(map[string]string, n)
		for i := range n {
			obj[fmt.Sprintf("t%05d", i)] = "mxfp4"
		}
		text, _ := json.Marshal(obj)
		_, err := ParseStamp("s", string(text))
		if (err == nil) != (n <= MaxStampEntries) {
			t.Errorf("%d entries: err = %v", n, err)
		}
	}
}

func TestStampsMerge(t *testing.T) {
	meta := map[string]map[string]string{
		"shard-b": {StampKey: `{"x":"mxfp4","y":"int8-row"}`, "other": "ignored"},
		"shard-a": {StampKey: `{"x":"mxfp4","z":"f32"}`},
		"shard-c": {"format": "pt"}, // unstamped
	}
	s, err := LoadStamps(meta)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3", s.Len())
	}
	if f, sh, ok := s.Lookup("x"); !ok || f != "mxfp4" || sh != "shard-a" {
		t.Fatalf("Lookup(x) = %q %q %v", f, sh, ok)
	}
	if _, _, ok := s.Lookup("w"); ok {
		t.Fatal("unstamped tensor found")
	}
	// Conflicting claims name both shards, whatever the map order.
	meta["shard-c"] = map[string]string{StampKey: `{"y":"fp8-e4m3-b128"}`}
	for range 5 {
		_, err := LoadStamps(meta)
		var ce *StampConflictError
		if !errors.As(err, &ce) || !errors.Is(err, ErrStamp) || ce.Tensor != "y" || ce.ShardA != "shard-b" || ce.ShardB != "shard-c" ||
			ce.FormatA != "int8-row" || ce.FormatB != "fp8-e4m3-b128" {
			t.Fatalf("conflict: %v", err)
		}
		if !strings.Contains(err.Error(), "shard-b") || !strings.Contains(err.Error(), "shard-c") {
			t.Fatalf("conflict message %q does not name both shards", err)
		}
	}
	// A malformed shard fails the load, naming it.
	meta["shard-c"] = map[string]string{StampKey: `{"y":1}`}
	if _, err := LoadStamps(meta); err == nil || !strings.Contains(err.Error(), "shard-c") {
		t.Fatalf("malformed shard: %v", err)
	}
	// Add leaves s unchanged on error.
	s2 := &Stamps{}
	if err := s2.Add("a", map[string]string{StampKey: `{"p":"f32"}`}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Add("b", map[string]string{StampKey: `{"q":"f16","p":"bf16"}`}); err == nil {
		t.Fatal("conflict accepted")
	}
	if _, _, ok := s2.Lookup("q"); ok {
		t.Fatal("failed Add left entries behind")
	}
	// nil and zero Stamps are unstamped.
	var nilS *Stamps
	if nilS.Len() != 0 {
		t.Fatal("nil Len")
	}
	if f, _, err := nilS.Resolve("t", 2, 3, TensorDesc{"F32", 24}, nil); err != nil || f != F32 {
		t.Fatalf("nil Stamps Resolve: %v %v", f, err)
	}
}

func TestStampsResolveAndVerify(t *testing.T) {
	s, err := LoadStamps(map[string]map[string]string{
		"s": {StampKey: `{"head":"fp8-e4m3-b128","empty":"","bad":"int4-row"}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The stamp breaks the int8/fp8 tie.
	if f, _, err := s.Resolve("head", 1, 64, TensorDesc{"U8", 64}, sd("F32", 4)); err != nil || f != FP8E4M3B128 {
		t.Fatalf("head: %v %v", f, err)
	}
	if f, _, err := s.Resolve("unstamped", 1, 64, TensorDesc{"U8", 64}, sd("F32", 4)); err != nil || f != Int8Row {
		t.Fatalf("unstamped: %v %v", f, err)
	}
	var unk *ErrStampUnknown
	if _, _, err := s.Resolve("empty", 1, 64, TensorDesc{"U8", 64}, sd("F32", 4)); !errors.As(err, &unk) {
		t.Fatalf("empty stamp: %v", err)
	}
	var mis *ErrStampMismatch
	if _, _, err := s.Resolve("bad", 1, 64, TensorDesc{"U8", 64}, sd("F32", 4)); !errors.As(err, &mis) {
		t.Fatalf("bad stamp: %v", err)
	}
	if err := Verify("t", "", MXFP4); err != nil {
		t.Fatal(err)
	}
	if err := Verify("t", "mxfp4", MXFP4); err != nil {
		t.Fatal(err)
	}
	if err := Verify("t", "mxfp4-cfs1", MXFP4); err != nil {
		t.Fatal(err)
	}
	if err := Verify("t", "int4-row", MXFP4); !errors.As(err, &mis) || mis.Inferred != "mxfp4" {
		t.Fatal(err)
	}
	if err := Verify("t", "MXFP4", MXFP4); !errors.As(err, &unk) {
		t.Fatal(err)
	}
}

func TestResolvePairScaleStamps(t *testing.T) {
	s, err := LoadStamps(map[string]map[string]string{"s": {StampKey: `{"w":"mxfp4","w_scale":"mxfp4-scale-cfs1","v_scale":"mxfp4","u_scale":"zz"}`}})
	if err != nil {
		t.Fatal(err)
	}
	w, sc := TensorDesc{"U8", 512}, sd("U8", 32)
	if f, _, err := s.ResolvePair("w", "plain_scale", 4, 256, w, sc); err != nil || f != MXFP4 {
		t.Fatalf("unstamped scale: %v %v", f, err)
	}
	var cod *CodedError
	if _, _, err := s.ResolvePair("w", "w_scale", 4, 256, w, sc); !errors.As(err, &cod) || !strings.Contains(err.Error(), "DecodeScaleRecord") {
		t.Fatalf("coded scale: %v", err)
	}
	var mis *ErrStampMismatch
	if _, _, err := s.ResolvePair("w", "v_scale", 4, 256, w, sc); !errors.As(err, &mis) {
		t.Fatalf("weight format on a scale: %v", err)
	}
	var unk *ErrStampUnknown
	if _, _, err := s.ResolvePair("w", "u_scale", 4, 256, w, sc); !errors.As(err, &unk) {
		t.Fatalf("unknown scale stamp: %v", err)
	}
}
