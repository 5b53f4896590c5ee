package trunk

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hugePage is the alignment and length granule of arenas: 2 MiB lets the kernel back them with
// transparent huge pages, which cuts the page pins of a large O_DIRECT read by 512× (§8.7).
const hugePage = 2 << 20

// arena is anonymous memory outside the Go heap: its pages count towards RSS only once written,
// and it is returned to the kernel at free, not at the next garbage collection.
type arena struct {
	whole []byte // the mapping, as returned by mmap
	buf   []byte // the 2 MiB-aligned part handed out
}

// newArena maps n bytes (rounded up to 2 MiB) 2 MiB-aligned; huge asks for MADV_HUGEPAGE (advisory:
// a kernel without transparent huge pages still serves the mapping).
func newArena(n int64, huge bool) (*arena, error) {
	if n <= 0 {
		return &arena{}, nil
	}
	size := roundUp(n, hugePage)
	whole, err := unix.Mmap(-1, 0, int(size+hugePage), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("trunk: map %d-byte arena: %w", size, err)
	}
	addr := uintptrOf(whole)
	skip := int((hugePage - addr%hugePage) % hugePage)
	a := &arena{whole: whole, buf: whole[skip : skip+int(size) : skip+int(size)]}
	if huge {
		_ = unix.Madvise(a.buf, unix.MADV_HUGEPAGE) // advisory
	}
	return a, nil
}

func (a *arena) free() error {
	if a == nil || a.whole == nil {
		return nil
	}
	err := unix.Munmap(a.whole)
	a.whole, a.buf = nil, nil
	return err
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
