//go:build unix

package storage

import "golang.org/x/sys/unix"

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
func FreeAligned(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	return unix.Munmap(b[:cap(b)])
}
