package cache

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/mxfp4"
	"github.com/k3-project/k3/quant/rans"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

// ErrExpertTensor reports a routed expert whose tensors are missing or
// malformed (§9.1); the message names the tensor and the rule.
var ErrExpertTensor = errors.New("cache: bad routed-expert tensor")

// Shapes are the expected logical [rows, cols] of an expert's three MXFP4
// matrices (§3.3): W1 and W3 are [I, ℓ], W2 is [ℓ, I]. With no Shapes
// the store takes them from the tensors (rows of the packed array, twice its
// columns), checking only the rules every MXFP4 pair obeys.
type Shapes struct {
	W1, W2, W3 [2]int
}

// part indices in canonical order: w1p, w1s, w2p, w2s, w3p, w3s.
const nparts = 6

// location says where one expert's six tensors are and how they land in a
// slot.
//
// A raw expert is read straight into its slot. A coded expert (some packed
// weight stored as a CFS1 record, package quant/rans) is read by the same
// rules into a read goroutine's scratch buffer instead, and each part is
// then decoded (records) or copied (raw parts, scales) to slot offset
// dst[i]: the slot holds exactly the bytes of the raw checkpoint.
//
// A store holds one location per routed expert of every layer (82,432 at
// K3), so the fields only coded experts need live behind code.
type location struct {
	file int32 // index into Store.files
	// contiguous: one read of [lo, lo+n); otherwise six reads, part i at
	// file offset off[i] into the slot (coded: the scratch) at window at[i].
	contiguous bool
	lo, n      int64
	off        [nparts]int64 // absolute file offsets
	size       [nparts]int64 // stored bytes
	// at is, contiguous, the offset of part i inside the payload; otherwise
	// the 4096-aligned offset of part i's window.
	at         [nparts]int64
	rows, cols [3]int32
	code       *codedParts // nil for a raw expert
}

// codedParts is where a coded expert's parts land in its slot.
type codedParts struct {
	rec  [3]bool       // w{1,2,3}.weight_packed is a record
	dst  [nparts]int64 // slot offset of part i
	dlen [nparts]int64 // decoded bytes of part i (size[i] when raw)
}

// coded reports whether some part of the expert is a record.
func (l *location) coded() bool { return l.code != nil }

// partLen is part i's decoded byte count.
func (l *location) partLen(i int) int64 {
	if l.code != nil {
		return l.code.dlen[i]
	}
	return l.size[i]
}

// partAlign spaces the parts of a coded expert in its slot.
const partAlign = 64

// readSpan is the buffer space the expert's reads use: in the slot for a
// raw expert, in the scratch for a coded one.
func (l *location) readSpan() int64 {
	if l.contiguous {
		return align4096(l.n + 2*storage.Alignment)
	}
	return l.at[nparts-1] + align4096(storage.WindowLen(l.off[nparts-1], l.size[nparts-1]))
}

// need is the slot space the expert uses. A coded expert's parts, packed
// at 64-byte steps, fit the slot of a contiguous raw expert of the same
// decoded size, which is what it is given: the slot stride, hence the slot
// count of a budget and every hit and eviction, is the raw checkpoint's.
func (l *location) need() int64 {
	if c := l.code; c != nil {
		return max(align4096(c.dst[nparts-1]+c.dlen[nparts-1]), SlotSize(l.payloadBytes()))
	}
	return l.readSpan()
}

// payloadBytes is the expert's own (decoded) byte count.
func (l *location) payloadBytes() int64 {
	var n int64
	for i := range nparts {
		n += l.partLen(i)
	}
	return n
}

// storedBytes is what reading the expert transfers from its shard.
func (l *location) storedBytes() int64 {
	var n int64
	for _, s := range l.size {
		n += s
	}
	return n
}

func align4096(n int64) int64 {
	return (n + storage.Alignment - 1) &^ (storage.Alignment - 1)
}

// locate resolves expert (layer, e) in ck (§9.1) under the
// checkpoint's stamps. fileIndex maps a shard path to its index in the
// store's file list, adding it when new.
//
// A packed weight stamped with a CFS1 container (rans.Inspect) is a 1-D U8
// record: its base format must be MXFP4 and its decoded length rows·cols/2,
// with rows and cols from Shapes or, without them, from the raw scale
// tensor. A tensor that looks like a record but is not stamped, a corrupt
// record header and a coded scale are refused: nothing is guessed to be
// coded.
func locate(ck *safetensors.Checkpoint, stamps *quant.Stamps, layer, e int, shapes *Shapes, fileIndex func(string) int32) (location, error) {
	var loc location
	var code codedParts // kept only when some part is a record
	coded := false
	p := layout.ExpertPrefix(layer, e)
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
		ps, err := rans.Inspect(ck, stamps, pt)
		if err != nil {
			return loc, fmt.Errorf("%w: %s.weight_packed: %w", ErrExpertTensor, name, err)
		}
		ss, err := rans.Inspect(ck, stamps, st)
		if err != nil {
			return loc, fmt.Errorf("%w: %s.weight_scale: %w", ErrExpertTensor, name, err)
		}
		if ss.Coded {
			return loc, fmt.Errorf("%w: %s.weight_scale is stamped %v: scales are stored raw", ErrExpertTensor, name, ss.Format)
		}
		if len(st.Shape) != 2 || (!ps.Coded && len(pt.Shape) != 2) {
			return loc, fmt.Errorf("%w: %s: packed %v and scale %v must be 2-D", ErrExpertTensor, name, pt.Shape, st.Shape)
		}
		packed := pt.Shape
		var rows, cols int
		switch {
		case shapes != nil:
			want := [3][2]int{shapes.W1, shapes.W2, shapes.W3}[w]
			rows, cols = want[0], want[1]
		case ps.Coded:
			rows, cols = int(st.Shape[0]), mxfp4.GroupSize*int(st.Shape[1])
		default:
			rows, cols = int(pt.Shape[0]), 2*int(pt.Shape[1])
		}
		if ps.Coded {
			if ps.Base != quant.MXFP4 {
				return loc, fmt.Errorf("%w: %s.weight_packed is stamped %v, whose weights are %v, not mxfp4", ErrExpertTensor, name, ps.Format, ps.Base)
			}
			if want := int64(rows) * int64(cols) / 2; int64(ps.DecodedLen) != want || cols%2 != 0 {
				return loc, fmt.Errorf("%w: %s.weight_packed: record decodes to %d bytes, [%d, %d] mxfp4 weights are %d",
					ErrExpertTensor, name, ps.DecodedLen, rows, cols, want)
			}
			packed = []int64{int64(rows), int64(cols / 2)}
			coded, code.rec[w] = true, true
		}
		if err := mxfp4.CheckShapes(rows, cols, []int{int(packed[0]), int(packed[1])}, []int{int(st.Shape[0]), int(st.Shape[1])}); err != nil {
			return loc, fmt.Errorf("%w: %s: %w", ErrExpertTensor, name, err)
		}
		code.dlen[2*w], code.dlen[2*w+1] = int64(ps.DecodedLen), st.Size
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
	if coded {
		var at int64
		for i := range code.dst {
			code.dst[i] = at
			at += (code.dlen[i] + partAlign - 1) &^ (partAlign - 1)
		}
		loc.code = &code
	}
	if hi-lo == own {
		loc.contiguous, loc.lo, loc.n = true, lo, hi-lo
		for i, t := range ts {
			loc.at[i] = t.Offset - lo
		}
		return loc, nil
	}
	// Six windows, each 4096-aligned in the slot, in canonical order.
	var at int64
	for i, t := range ts {
		loc.at[i] = at
		at += align4096(storage.WindowLen(t.Offset, t.Size))
	}
	loc.n = own
	return loc, nil
}
