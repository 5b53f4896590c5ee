package cache

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/k3-project/k3/quant/mxfp4"
	"github.com/k3-project/k3/safetensors"
)

// ErrExpertTensor reports a routed expert whose tensors are missing or
// malformed (SPEC §9.1); the message names the tensor and the rule.
var ErrExpertTensor = errors.New("cache: bad routed-expert tensor")

// Shapes are the expected logical [rows, cols] of an expert's three MXFP4
// matrices (SPEC §3.3): W1 and W3 are [I, ℓ], W2 is [ℓ, I]. With no Shapes
// the store takes them from the tensors (rows of the packed array, twice its
// columns), checking only the rules every MXFP4 pair obeys.
type Shapes struct {
	W1, W2, W3 [2]int
}

// DefaultPrefix is the tensor-name prefix of the released checkpoint.
const DefaultPrefix = "language_model.model."

// part indices in canonical order: w1p, w1s, w2p, w2s, w3p, w3s.
const nparts = 6

// location says where one expert's six tensors are and how they land in a
// slot.
type location struct {
	file int32 // index into Store.files
	// contiguous: one read of [lo, lo+n); otherwise six reads, part i at
	// file offset off[i] into the slot at window base[i].
	contiguous bool
	lo, n      int64
	off        [nparts]int64 // absolute file offsets
	size       [nparts]int64
	rel        [nparts]int64 // contiguous: offset of part i inside the payload
	base       [nparts]int64 // non-contiguous: 4096-aligned slot offset of part i's window
	rows, cols [3]int32
}

// need is the slot space the expert's reads use.
func (l *location) need() int64 {
	if l.contiguous {
		return align4096(l.n + 2*safetensors.Alignment)
	}
	return l.base[nparts-1] + align4096(safetensors.WindowLen(l.off[nparts-1], l.size[nparts-1]))
}

// payloadBytes is the expert's own byte count.
func (l *location) payloadBytes() int64 {
	var n int64
	for _, s := range l.size {
		n += s
	}
	return n
}

func align4096(n int64) int64 {
	return (n + safetensors.Alignment - 1) &^ (safetensors.Alignment - 1)
}

// expertPrefix is "<prefix>layers.{L}.block_sparse_moe.experts.{e}.".
func expertPrefix(prefix string, layer, e int) string {
	return prefix + "layers." + strconv.Itoa(layer) + ".block_sparse_moe.experts." + strconv.Itoa(e) + "."
}

// locate resolves expert (layer, e) in ck (SPEC §9.1). fileIndex maps a
// shard path to its index in the store's file list, adding it when new.
func locate(ck *safetensors.Checkpoint, prefix string, layer, e int, shapes *Shapes, fileIndex func(string) int32) (location, error) {
	var loc location
	p := expertPrefix(prefix, layer, e)
	var ts [nparts]*safetensors.Tensor
	for w := range 3 {
		name := p + "w" + strconv.Itoa(w+1)
		pt, ok1 := ck.Tensor(name + ".weight_packed")
		st, ok2 := ck.Tensor(name + ".weight_scale")
		switch {
		case !ok1:
			return loc, fmt.Errorf("%w: %s.weight_packed is missing", ErrExpertTensor, name)
		case !ok2:
			return loc, fmt.Errorf("%w: %s.weight_scale is missing", ErrExpertTensor, name)
		}
		if pt.DType != safetensors.U8 && pt.DType != safetensors.I8 {
			return loc, fmt.Errorf("%w: %s.weight_packed is %v, want U8 or I8", ErrExpertTensor, name, pt.DType)
		}
		if st.DType != safetensors.U8 && st.DType != safetensors.F8_E8M0 {
			return loc, fmt.Errorf("%w: %s.weight_scale is %v, want U8 or F8_E8M0", ErrExpertTensor, name, st.DType)
		}
		if len(pt.Shape) != 2 || len(st.Shape) != 2 {
			return loc, fmt.Errorf("%w: %s: packed %v and scale %v must be 2-D", ErrExpertTensor, name, pt.Shape, st.Shape)
		}
		rows, cols := int(pt.Shape[0]), 2*int(pt.Shape[1])
		if shapes != nil {
			want := [3][2]int{shapes.W1, shapes.W2, shapes.W3}[w]
			rows, cols = want[0], want[1]
		}
		if err := mxfp4.CheckShapes(rows, cols, []int{int(pt.Shape[0]), int(pt.Shape[1])}, []int{int(st.Shape[0]), int(st.Shape[1])}); err != nil {
			return loc, fmt.Errorf("%w: %s: %w", ErrExpertTensor, name, err)
		}
		if pt.File != st.File || (w > 0 && pt.File != ts[0].File) {
			return loc, fmt.Errorf("%w: %s: the six tensors of expert %d are not in one shard", ErrExpertTensor, name, e)
		}
		ts[2*w], ts[2*w+1] = pt, st
		loc.rows[w], loc.cols[w] = int32(rows), int32(cols)
	}
	loc.file = fileIndex(ts[0].File)
	lo, hi, own := ts[0].Offset, ts[0].Offset+ts[0].Size, int64(0)
	for i, t := range ts {
		loc.off[i], loc.size[i] = t.Offset, t.Size
		lo, hi = min(lo, t.Offset), max(hi, t.Offset+t.Size)
		own += t.Size
	}
	if hi-lo == own {
		loc.contiguous, loc.lo, loc.n = true, lo, hi-lo
		for i, t := range ts {
			loc.rel[i] = t.Offset - lo
		}
		return loc, nil
	}
	// Six windows, each 4096-aligned in the slot, in canonical order.
	var at int64
	for i, t := range ts {
		loc.base[i] = at
		at += align4096(safetensors.WindowLen(t.Offset, t.Size))
	}
	loc.n = own
	return loc, nil
}
