package testkit

import (
	"os"
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
