package k3

import (
	"errors"
	"fmt"
	"github.com/k3-project/k3/internal/parallel"
	"strconv"
	"strings"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/mxfp4"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/trunk"
)

// Tensor-name prefixes of the released layout (SPEC §3.3).
const (
	prefixModel = "language_model.model."
	nameLMHead  = "language_model.lm_head.weight" // no ".model." segment
)

func layerPrefix(l int) string { return prefixModel + "layers." + strconv.Itoa(l) + "." }

// class is a byte-accounting class of SPEC §3.4 (reported through Info).
type class int

const (
	classEmbedHead class = iota // embedding, lm_head and the model-level vectors
	classTrunk                  // every per-layer tensor except routed experts
	classExperts                // routed experts (MXFP4)
	numClasses
)

// binder looks tensors up by their released names, checks dtype and shape, and collects every
// problem so that Open refuses once with a complete *BindError.
//
// It runs twice. The describe pass reads headers only: it checks every tensor and lists the
// dense matrices (in the order the layer math first uses them) and the bytes of the float32
// vector copies, which is all the trunk planner needs, so a plan exists before anything is
// allocated. The build pass reads the small vectors, takes each matrix from its source (a view
// of a mapped shard, or the trunk store's pinned or streamed matrix) and runs the constructors.
type binder struct {
	ck         *safetensors.Checkpoint
	describe   bool
	missing    []string
	mismatched []string
	params     [numClasses]int64
	bytes      [numClasses]int64
	tensors    [numClasses]int

	item  int            // trunk.Item of the matrices being bound: a layer, trunk.Head or trunk.Embed
	dense []trunk.Tensor // describe: every dense matrix, in walk order
	side  int64          // describe: bytes of the float32 copies of vectors
	store *trunk.Store   // build: the budgeted source of dense matrices (nil: mapped views)
	// cachedExperts: the expert store (cache.Store) locates and checks the routed experts,
	// which may be entropy-coded, so neither pass maps them.
	cachedExperts bool
	packed        *trunk.Packed  // per-layer tensors come from trunk.bin when set
	pool          *parallel.Pool // runs the split mat-vecs of mapped matrices (nil: goroutines per call)
}

func (b *binder) err(dir string) error {
	if len(b.missing) == 0 && len(b.mismatched) == 0 {
		return nil
	}
	return &BindError{Dir: dir, Missing: b.missing, Mismatched: b.mismatched}
}

// lookup returns the tensor or records it as missing (with the shard the index names).
func (b *binder) lookup(name string) *safetensors.Tensor {
	if b.packed != nil && b.item >= 0 && !strings.Contains(name, ".experts.") {
		if t, ok := b.packed.Tensor(name); ok {
			return t
		}
		b.missing = append(b.missing, name+" (not in "+b.packed.LayoutPath()+")")
		return nil
	}
	t, err := b.ck.Require(name)
	if err != nil {
		var me *safetensors.MissingTensorError
		if errors.As(err, &me) && me.Shard != "" {
			b.missing = append(b.missing, fmt.Sprintf("%s (index: shard %s, %v)", name, me.Shard, me.State))
		} else {
			b.missing = append(b.missing, name)
		}
		return nil
	}
	return t
}

func (b *binder) mismatch(t *safetensors.Tensor, want string) {
	b.mismatched = append(b.mismatched, fmt.Sprintf("%s: found %v %v, want %s", t.Name, t.DType, t.Shape, want))
}

func (b *binder) count(c class, t *safetensors.Tensor, params int64) {
	b.params[c] += params
	b.bytes[c] += t.Size
	b.tensors[c]++
}

func shapeIs(s []int64, want ...int) bool {
	if len(s) != len(want) {
		return false
	}
	for i, w := range want {
		if s[i] != int64(w) {
			return false
		}
	}
	return true
}

func dims(d ...int) string {
	p := make([]string, len(d))
	for i, v := range d {
		p[i] = strconv.Itoa(v)
	}
	return "[" + strings.Join(p, ", ") + "]"
}

// matrix binds a [rows, cols] weight matrix stored as BF16, F32 or F16.
func (b *binder) matrix(name string, rows, cols int, c class) quant.Matrix {
	return b.matrixOf(name, rows, cols, c, false)
}

// matrixOf is matrix; whole marks a matrix the layer reads by rows in its own order, which must
// stream as one piece.
func (b *binder) matrixOf(name string, rows, cols int, c class, whole bool) quant.Matrix {
	t := b.lookup(name)
	if t == nil {
		return nil
	}
	want := "BF16, F32 or F16 " + dims(rows, cols)
	if !shapeIs(t.Shape, rows, cols) {
		b.mismatch(t, want)
		return nil
	}
	var ctor func(int, int, []byte) (quant.Matrix, error)
	switch t.DType {
	case safetensors.BF16:
		ctor = quant.NewBF16
	case safetensors.F32:
		ctor = quant.NewF32
	case safetensors.F16:
		ctor = quant.NewF16
	default:
		b.mismatch(t, want)
		return nil
	}
	if b.describe {
		b.dense = append(b.dense, trunk.Tensor{Item: b.item, Name: name, File: t.File, Offset: t.Offset, Size: t.Size,
			DType: t.DType, Rows: rows, Cols: cols, Whole: whole})
		return nil
	}
	b.count(c, t, int64(rows)*int64(cols))
	if b.store != nil {
		m, ok := b.store.Matrix(name)
		if name == prefixModel+"embed_tokens.weight" {
			m, ok = b.store.Embedding(), true
		}
		if !ok {
			b.mismatched = append(b.mismatched, name+": not served by the trunk store")
			return nil
		}
		return m
	}
	data, err := b.ck.Bytes(t)
	if err != nil {
		b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	m, err := ctor(rows, cols, data)
	if err != nil {
		b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	if b.pool == nil { // a nil *parallel.Pool in the interface would not read as nil
		return m
	}
	return quant.OnRunner(m, b.pool)
}

// countExperts counts one MoE layer's routed experts for Info when the expert store, not the
// binder, located them (the store checked every shape).
func (b *binder) countExperts(c *config.Config) {
	n := int64(c.NumExperts)
	b.params[classExperts] += 3 * int64(c.MoEInter) * int64(c.Latent) * n
	b.bytes[classExperts] += expertBytes(c) * n
	b.tensors[classExperts] += 6 * c.NumExperts
}

// readF32 widens a small tensor to float32, from trunk.bin when it lives there. The describe
// pass reads nothing: it returns nil after counting the bytes the copy will take.
func (b *binder) readF32(t *safetensors.Tensor) ([]float32, error) {
	if b.describe {
		b.side += 4 * t.NumElements()
		return nil, nil
	}
	if b.packed != nil && b.packed.Holds(t) {
		return b.packed.ReadF32(t)
	}
	return b.ck.ReadF32(t)
}

// vector binds a small vector of n elements, accepting BF16, F16, F32 (widened exactly) and F64
// (rounded once), with shape [n] or any of the alternative shapes given (e.g. [1, n]).
func (b *binder) vector(name string, n int, c class, alt ...[]int) []float32 {
	t := b.lookup(name)
	if t == nil {
		return nil
	}
	ok := shapeIs(t.Shape, n)
	wantShapes := []string{dims(n)}
	for _, a := range alt {
		ok = ok || shapeIs(t.Shape, a...)
		wantShapes = append(wantShapes, dims(a...))
	}
	switch t.DType {
	case safetensors.BF16, safetensors.F16, safetensors.F32, safetensors.F64:
	default:
		ok = false
	}
	if !ok {
		b.mismatch(t, "BF16, F16 or F32 "+strings.Join(wantShapes, " or "))
		return nil
	}
	v, err := b.readF32(t)
	if err != nil {
		b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	b.count(c, t, t.NumElements())
	return v
}

// aLog binds A_log: [D] (released, entries H..D−1 padding) or [H]. Only the first H entries are
// used; parameters are counted as stored, padding included, as SPEC §3.5's resident-set figure does.
func (b *binder) aLog(name string, h, d int) []float32 {
	t := b.lookup(name)
	if t == nil {
		return nil
	}
	if !shapeIs(t.Shape, d) && !shapeIs(t.Shape, h) || !smallFloat(t.DType) {
		b.mismatch(t, "BF16, F16 or F32 "+dims(d)+" or "+dims(h))
		return nil
	}
	v, err := b.readF32(t)
	if err != nil {
		b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	b.count(classTrunk, t, t.NumElements())
	if v == nil {
		return nil
	}
	return v[:h]
}

// conv binds depthwise taps [P, 1, K] (released) or [P, K] as a flat [P][K] slice.
func (b *binder) conv(name string, p, k int) []float32 {
	t := b.lookup(name)
	if t == nil {
		return nil
	}
	if !shapeIs(t.Shape, p, 1, k) && !shapeIs(t.Shape, p, k) || !smallFloat(t.DType) {
		b.mismatch(t, "BF16, F16 or F32 "+dims(p, 1, k)+" or "+dims(p, k))
		return nil
	}
	v, err := b.readF32(t)
	if err != nil {
		b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	b.count(classTrunk, t, int64(p*k))
	return v
}

func ints(s []int64) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[i] = int(min(max(v, -1), 1<<40)) // header validation already bounds dimensions
	}
	return out
}

func smallFloat(d safetensors.DType) bool {
	return d == safetensors.BF16 || d == safetensors.F16 || d == safetensors.F32 || d == safetensors.F64
}

// mxfp4 binds one routed-expert matrix (logical [rows, cols]) from its weight_packed and
// weight_scale tensors with the geometry checks of SPEC §6.2.
func (b *binder) mxfp4(prefix string, rows, cols int) quant.Matrix {
	pt, st := b.lookup(prefix+".weight_packed"), b.lookup(prefix+".weight_scale")
	if pt == nil || st == nil {
		return nil
	}
	var probs []string
	if pt.DType != safetensors.U8 && pt.DType != safetensors.I8 {
		probs = append(probs, fmt.Sprintf("packed dtype %v, want U8 or I8", pt.DType))
	}
	if st.DType != safetensors.U8 && st.DType != safetensors.F8_E8M0 {
		probs = append(probs, fmt.Sprintf("scale dtype %v, want U8 or F8_E8M0", st.DType))
	}
	// The geometry rules of SPEC §6.2 (2-D, equal rows, group size 32, logical width, width % 32)
	// live in one place, the mxfp4 package; it names an implied group size other than 32.
	if len(pt.Shape) == 1 {
		// A 1-D packed tensor is how k3 compress-experts stores an entropy-coded record; only the
		// expert cache decodes those (the stamp check happens there).
		probs = append(probs, "1-D packed tensor (an entropy-coded record?): coded experts need the expert cache (WithCacheBudget)")
	} else if err := mxfp4.CheckShapes(rows, cols, ints(pt.Shape), ints(st.Shape)); err != nil {
		probs = append(probs, err.Error())
	}
	if len(probs) > 0 {
		b.mismatched = append(b.mismatched, fmt.Sprintf("%s.weight_{packed,scale}: %s (found %v %v and %v %v)",
			prefix, strings.Join(probs, "; "), pt.DType, pt.Shape, st.DType, st.Shape))
		return nil
	}
	if b.describe {
		return nil
	}
	packed, err1 := b.ck.Bytes(pt)
	scales, err2 := b.ck.Bytes(st)
	if err := errors.Join(err1, err2); err != nil {
		b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", prefix, err))
		return nil
	}
	m, err := quant.NewMXFP4(rows, cols, packed, scales)
	if err != nil {
		b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", prefix, err))
		return nil
	}
	b.count(classExperts, pt, int64(rows)*int64(cols))
	b.bytes[classExperts] += st.Size
	b.tensors[classExperts]++
	return m
}
