//go:build !unix

package cache

// hugeAlign is the arena alignment: one transparent huge page.
const hugeAlign = 2 << 20

// arena is heap memory aligned by hand where anonymous mappings are not
// available.
type arena struct {
	mapping []byte
	mem     []byte
	huge    bool
}

func newArena(n int64, huge bool) (*arena, error) {
	if n <= 0 {
		return &arena{}, nil
	}
	length := (n + hugeAlign - 1) &^ (hugeAlign - 1)
	m := make([]byte, length+hugeAlign)
	skip := (hugeAlign - int(addr(m)%hugeAlign)) % hugeAlign
	return &arena{mapping: m, mem: m[skip : skip+int(length) : skip+int(length)]}, nil
}

func (a *arena) free() error {
	if a != nil {
		a.mapping, a.mem = nil, nil
	}
	return nil
}
