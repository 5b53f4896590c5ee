//go:build unix

package cache

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hugeAlign is the arena alignment: one transparent huge page.
const hugeAlign = 2 << 20

// arena is an anonymous mapping; mem is its 2 MiB-aligned part of the
// requested length. Pages are touched only when a slot is filled.
type arena struct {
	mapping []byte
	mem     []byte
	huge    bool // MADV_HUGEPAGE was accepted
}

// newArena maps n bytes (rounded up to 2 MiB) aligned to 2 MiB and, if
// huge, advises transparent huge pages (advisory: a refusal is reported,
// not fatal).
func newArena(n int64, huge bool) (*arena, error) {
	if n <= 0 {
		return &arena{}, nil
	}
	length := (n + hugeAlign - 1) &^ (hugeAlign - 1)
	if length > int64(int(^uint(0)>>1))-hugeAlign {
		return nil, fmt.Errorf("cache: arena of %d bytes does not fit the address space", n)
	}
	m, err := unix.Mmap(-1, 0, int(length+hugeAlign), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("cache: mapping a %d-byte arena: %w", length, err)
	}
	skip := (hugeAlign - int(addr(m)%hugeAlign)) % hugeAlign
	a := &arena{mapping: m, mem: m[skip : skip+int(length) : skip+int(length)]}
	if huge {
		a.huge = adviseHuge(a.mem) == nil
	}
	return a, nil
}

func (a *arena) free() error {
	if a == nil || a.mapping == nil {
		return nil
	}
	err := unix.Munmap(a.mapping)
	a.mapping, a.mem = nil, nil
	return err
}
