package testkit

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FlipBits xors the byte at offset off of the file path with mask, in place:
// how the tests that require damage to be detected (a checksum, a coded
// record, the packed trunk) make it, on a copy (CopyDir) of a fixture.
// Flipping the same bits again restores the file.
func FlipBits(tb testing.TB, path string, off int64, mask byte) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var b [1]byte
	_, err = f.ReadAt(b[:], off)
	if err == nil {
		b[0] ^= mask
		_, err = f.WriteAt(b[:], off)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatalf("testkit: FlipBits %s at %d: %v", path, off, err)
	}
}

// HideHeaderKey renames the JSON key key in the header of every
// *.safetensors shard of dir to an unknown key of the same length (its last
// character replaced by X), so that the header length and every offset stay
// as they were while the key is gone, and returns how many shards held it.
func HideHeaderKey(tb testing.TB, dir, key string) int {
	tb.Helper()
	if key == "" {
		tb.Fatal("testkit: HideHeaderKey: empty key")
	}
	shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		tb.Fatal(err)
	}
	quoted := []byte(`"` + key + `"`)
	alt := []byte(`"` + key[:len(key)-1] + `X"`)
	n := 0
	for _, p := range shards {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		if len(b) < 8 {
			tb.Fatalf("testkit: HideHeaderKey: %s has no header", p)
		}
		hl := 8 + binary.LittleEndian.Uint64(b)
		if hl > uint64(len(b)) {
			tb.Fatalf("testkit: HideHeaderKey: %s: header of %d bytes in a file of %d", p, hl-8, len(b))
		}
		if i := bytes.Index(b[:hl], quoted); i >= 0 {
			copy(b[i:], alt)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				tb.Fatal(err)
			}
			n++
		}
	}
	return n
}
