package testkit

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

func TestFlipBits(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	orig := []byte{0x00, 0xff, 0x10, 0x01}
	if err := os.WriteFile(p, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	FlipBits(t, p, 2, 0x11)
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x00, 0xff, 0x01, 0x01}; !bytes.Equal(got, want) {
		t.Fatalf("after one flip: % x, want % x", got, want)
	}
	FlipBits(t, p, 2, 0x11)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, orig) {
		t.Fatalf("after flipping back: % x, want % x", got, orig)
	}
}

func TestHideHeaderKey(t *testing.T) {
	dir := t.TempDir()
	header := `{"__metadata__":{"colibri.fmt":"x"}}`
	shard := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	shard = append(append(shard, header...), 1, 2, 3, 4)
	for _, name := range []string{"a.safetensors", "b.safetensors"} {
		if err := os.WriteFile(filepath.Join(dir, name), shard, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := HideHeaderKey(t, dir, "colibri.fmt"); n != 2 {
		t.Fatalf("%d shards changed, want 2", n)
	}
	got, err := os.ReadFile(filepath.Join(dir, "b.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace(shard, []byte(`"colibri.fmt"`), []byte(`"colibri.fmX"`), 1)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if n := HideHeaderKey(t, dir, "colibri.fmt"); n != 0 {
		t.Fatalf("the key was found again in %d shards", n)
	}
}
