package testkit

import (
	"bytes"
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
