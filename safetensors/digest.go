package safetensors

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"slices"
	"strings"
)

// Digest is the SHA-256 of the set of tensors whose names start with prefix: their names,
// dtypes and shapes sorted by name, not their bytes. Two checkpoints of one geometry with
// different weight values share it.
func (c *Checkpoint) Digest(prefix string) [32]byte {
	type entry struct {
		name, dtype string
		shape       []int64
	}
	var es []entry
	for _, t := range c.Tensors() {
		if strings.HasPrefix(t.Name, prefix) {
			es = append(es, entry{t.Name, t.DType.String(), t.Shape})
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	h := sha256.New()
	var b [8]byte
	put := func(x uint64) { binary.LittleEndian.PutUint64(b[:], x); h.Write(b[:]) }
	for _, e := range es {
		put(uint64(len(e.name)))
		io.WriteString(h, e.name)
		put(uint64(len(e.dtype)))
		io.WriteString(h, e.dtype)
		put(uint64(len(e.shape)))
		for _, d := range e.shape {
			put(uint64(d))
		}
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
