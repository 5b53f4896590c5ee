//go:build unix

package safetensors

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file read-only and shared, so views cost no heap
// and pages come from (and return to) the page cache.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return []byte{}, nil
	}
	if int64(int(size)) != size {
		return nil, unix.EFBIG
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Munmap(b)
}

// AllocAligned returns n bytes of zeroed anonymous memory outside the Go
// heap, page-aligned (so valid for direct reads) and invisible to the
// garbage collector. Release it with FreeAligned.
func AllocAligned(n int) ([]byte, error) {
	if n <= 0 {
		return nil, unix.EINVAL
	}
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

// FreeAligned releases memory from AllocAligned.
func FreeAligned(b []byte) error { return unmap(b[:cap(b)]) }
