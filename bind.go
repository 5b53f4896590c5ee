package k3

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/kernels/nn"
	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/quant/mxfp4"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/trunk"
)

// binder walks the tensor table (package layout) once: it looks every tensor up by its released
// name, checks dtype and shape, counts it for Info, lists the dense matrices in walk order and
// the bytes of the float32 vector copies (all the trunk planner needs, so a plan exists before
// anything is allocated), and collects every problem so that Open refuses once with a complete
// *BindError. Nothing is read or allocated by the walk; load then takes each checked tensor from
// its source (a view of a mapped shard, the trunk store's pinned or streamed matrix, trunk.bin)
// and Model.build runs the constructors.
type binder struct {
	ck         *safetensors.Checkpoint
	missing    []MissingTensor
	mismatched []string
	counts     [layout.NumClasses]ClassInfo

	model  []bound   // layout.Model's tensors
	layers [][]bound // per layer, layout.Layer's tensors
	// experts[l][e] are the six tensors of layer l's routed expert e (mapped experts only).
	experts [][][]bound
	dense   []trunk.Tensor // every dense matrix, in walk order
	side    int64          // bytes the built model holds for the vectors (heldBytes)
	// cachedExperts: the expert store (cache.Store) locates and checks the routed experts,
	// which may be entropy-coded, so the binder leaves them alone.
	cachedExperts bool
	packed        *trunk.Packed // per-layer tensors come from trunk.bin when set
}

// bound is one tensor of the table as the walk found it, and once loaded its value.
type bound struct {
	spec layout.Tensor
	t    *safetensors.Tensor // nil: missing or refused (already reported)
	ctor func(int, int, []byte) (quant.Matrix, error)
	mat  quant.Matrix
	vec  nn.Vec // at its stored width when gain(spec.Key) and stored BF16 or F16, else float32
}

// walk binds the tensors of the configuration's first nlayers layers.
func (b *binder) walk(c *config.Config, nlayers int) {
	b.model = b.bindAll(layout.Model(c))
	b.layers = make([][]bound, nlayers)
	b.experts = make([][][]bound, nlayers)
	for l := range nlayers {
		b.layers[l] = b.bindAll(layout.Layer(c, l))
		if c.IsDense(l) {
			continue
		}
		if b.cachedExperts {
			// The expert store locates and checks every expert itself (cache.New).
			n := int64(c.NumExperts)
			b.counts[layout.Experts].Params += 3 * int64(c.MoEInter) * int64(c.Latent) * n
			b.counts[layout.Experts].Bytes += layout.ExpertBytes(c) * n
			b.counts[layout.Experts].Tensors += 6 * c.NumExperts
			continue
		}
		b.experts[l] = make([][]bound, c.NumExperts)
		for e := range c.NumExperts {
			b.experts[l][e] = b.bindExpert(layout.Expert(c, l, e))
		}
	}
}

func (b *binder) bindAll(specs []layout.Tensor) []bound {
	out := make([]bound, len(specs))
	for i, s := range specs {
		out[i] = bound{spec: s}
		switch s.Kind {
		case layout.Matrix:
			b.matrix(&out[i])
		default:
			b.vector(&out[i])
		}
	}
	return out
}

func (b *binder) err(dir string) error {
	if len(b.missing) == 0 && len(b.mismatched) == 0 {
		return nil
	}
	return &BindError{Dir: dir, Missing: b.missing, Mismatched: b.mismatched}
}

// item is the trunk.Item of a table entry: its layer, trunk.Head or trunk.Embed.
func item(s layout.Tensor) int {
	switch {
	case s.Layer >= 0:
		return s.Layer
	case s.Name == layout.EmbedName:
		return trunk.Embed
	}
	return trunk.Head
}

// lookup returns the tensor or records it as missing (with the shard the index names).
func (b *binder) lookup(s layout.Tensor) *safetensors.Tensor {
	if b.packed != nil && s.Class == layout.Trunk {
		if t, ok := b.packed.Tensor(s.Name); ok {
			return t
		}
		b.missing = append(b.missing, MissingTensor{Name: s.Name, Packed: b.packed.LayoutPath()})
		return nil
	}
	if b.packed != nil && s.Kind == layout.Matrix {
		// The embedding table and the head, when the pack holds them (a lossless12 pack does;
		// older and bf16 packs leave them to the shards).
		if t, ok := b.packed.Tensor(s.Name); ok {
			return t
		}
	}
	t, err := b.ck.Require(s.Name)
	if err != nil {
		mt := MissingTensor{Name: s.Name}
		if me, ok := errors.AsType[*safetensors.MissingTensorError](err); ok {
			mt.Shard, mt.State = me.Shard, me.State
		}
		b.missing = append(b.missing, mt)
		return nil
	}
	return t
}

func (b *binder) mismatch(t *safetensors.Tensor, want string) {
	b.mismatched = append(b.mismatched, fmt.Sprintf("%s: found %v %v, want %s", t.Name, t.DType, t.Shape, want))
}

func (b *binder) count(c layout.Class, t *safetensors.Tensor, params int64) {
	b.counts[c].Params += params
	b.counts[c].Bytes += t.Size
	b.counts[c].Tensors++
}

func shapeIs(s []int64, want []int) bool {
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

func dims(d []int) string {
	p := make([]string, len(d))
	for i, v := range d {
		p[i] = strconv.Itoa(v)
	}
	return "[" + strings.Join(p, ", ") + "]"
}

// matrix checks a [rows, cols] weight matrix stored as BF16, F32 or F16 and lists it as dense.
func (b *binder) matrix(e *bound) {
	s := e.spec
	t := b.lookup(s)
	if t == nil {
		return
	}
	want := "BF16, F32 or F16 " + dims(s.Shape)
	if !shapeIs(t.Shape, s.Shape) {
		b.mismatch(t, want)
		return
	}
	dt := trunk.Tensor{Item: item(s), Name: s.Name, File: t.File, Offset: t.Offset, Size: t.Size,
		DType: t.DType, Rows: s.Rows, Cols: s.Cols, Whole: s.Whole}
	switch t.DType {
	case safetensors.BF16:
		e.ctor = quant.NewBF16
	case safetensors.F32:
		e.ctor = quant.NewF32
	case safetensors.F16:
		e.ctor = quant.NewF16
	case safetensors.U8:
		// A packed trunk's lossless12 matrix (§6.11): OpenPacked checked its header against
		// trunk.json; the store reads its rows, after the header.
		esc, ok := lossless12Packed(b.packed, t)
		if !ok {
			b.mismatch(t, want)
			return
		}
		e.ctor = quant.NewLossless12
		dt.Format, dt.Escapes = quant.Lossless12, esc
		dt.Offset, dt.Size = t.Offset+lossless12.HeaderSize, t.Size-lossless12.HeaderSize
	default:
		b.mismatch(t, want)
		return
	}
	e.t = t
	b.dense = append(b.dense, dt)
	b.count(s.Class, t, int64(s.Rows)*int64(s.Cols))
}

// vector checks a small tensor, read once at open and held as heldBytes says: a vector (BF16,
// F16, F32 or F64 with the released or the alternative shape), convolution taps or A_log.
// A_log's parameters are counted as stored, padding included, as §3.5's resident-set figure does.
func (b *binder) vector(e *bound) {
	s := e.spec
	t := b.lookup(s)
	if t == nil {
		return
	}
	ok := shapeIs(t.Shape, s.Shape) || s.Alt != nil && shapeIs(t.Shape, s.Alt)
	wantShapes := dims(s.Shape)
	if s.Alt != nil {
		wantShapes += " or " + dims(s.Alt)
	}
	if !ok || !smallFloat(t.DType) {
		b.mismatch(t, "BF16, F16 or F32 "+wantShapes)
		return
	}
	e.t = t
	b.side += heldBytes(s.Key, t.DType, t.NumElements())
	b.count(s.Class, t, t.NumElements())
}

// lossless12Packed returns the escape bytes of t when it is a lossless12 matrix of the packed
// trunk p.
func lossless12Packed(p *trunk.Packed, t *safetensors.Tensor) (int, bool) {
	if p == nil || !p.Holds(t) {
		return 0, false
	}
	return p.Lossless12(t.Name)
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

// bindExpert checks one routed expert's three MXFP4 matrices (packed and scale tensors, in
// layout.Expert's order) with the geometry rules of §6.2.
func (b *binder) bindExpert(specs []layout.Tensor) []bound {
	out := make([]bound, len(specs))
	for i := 0; i < len(specs); i += 2 {
		ps, ss := specs[i], specs[i+1]
		out[i], out[i+1] = bound{spec: ps}, bound{spec: ss}
		pt, st := b.lookup(ps), b.lookup(ss)
		if pt == nil || st == nil {
			continue
		}
		var probs []string
		if pt.DType != safetensors.U8 && pt.DType != safetensors.I8 {
			probs = append(probs, fmt.Sprintf("packed dtype %v, want U8 or I8", pt.DType))
		}
		if st.DType != safetensors.U8 && st.DType != safetensors.F8_E8M0 {
			probs = append(probs, fmt.Sprintf("scale dtype %v, want U8 or F8_E8M0", st.DType))
		}
		// The geometry rules of §6.2 (2-D, equal rows, group size 32, logical width, width % 32)
		// live in one place, the mxfp4 package; it names an implied group size other than 32.
		if len(pt.Shape) == 1 {
			// A 1-D packed tensor is how k3 compress-experts stores an entropy-coded record; only the
			// expert cache decodes those (the stamp check happens there).
			probs = append(probs, "1-D packed tensor (an entropy-coded record?): coded experts need the expert cache (WithCacheBudget)")
		} else if err := mxfp4.CheckShapes(ps.Rows, ps.Cols, ints(pt.Shape), ints(st.Shape)); err != nil {
			probs = append(probs, err.Error())
		}
		if len(probs) > 0 {
			prefix := strings.TrimSuffix(ps.Name, ".weight_packed")
			b.mismatched = append(b.mismatched, fmt.Sprintf("%s.weight_{packed,scale}: %s (found %v %v and %v %v)",
				prefix, strings.Join(probs, "; "), pt.DType, pt.Shape, st.DType, st.Shape))
			continue
		}
		out[i].t, out[i+1].t = pt, st
		b.count(layout.Experts, pt, int64(ps.Rows)*int64(ps.Cols))
		b.counts[layout.Experts].Bytes += st.Size
		b.counts[layout.Experts].Tensors++
	}
	return out
}

// load takes every tensor the walk accepted from its source: dense matrices from store (nil:
// views of the mapped shards, their split mat-vecs run on pool), vectors widened from the
// shards or trunk.bin, mapped experts as MXFP4 views. Failures are reported like mismatches.
func (b *binder) load(store *trunk.Store, pool *parallel.Pool) {
	for _, list := range append([][]bound{b.model}, b.layers...) {
		for i := range list {
			b.loadOne(&list[i], store, pool)
		}
	}
	for _, layer := range b.experts {
		for _, ex := range layer {
			for i := 0; i < len(ex); i += 2 {
				p, s := &ex[i], &ex[i+1]
				if p.t == nil {
					continue
				}
				packed, err1 := b.ck.Bytes(p.t)
				scales, err2 := b.ck.Bytes(s.t)
				if err := errors.Join(err1, err2); err != nil {
					b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", p.spec.Name, err))
					continue
				}
				m, err := quant.NewMXFP4(p.spec.Rows, p.spec.Cols, packed, scales)
				if err != nil {
					b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", p.spec.Name, err))
					continue
				}
				p.mat = m
			}
		}
	}
}

func (b *binder) loadOne(e *bound, store *trunk.Store, pool *parallel.Pool) {
	s := e.spec
	if e.t == nil {
		return
	}
	fail := func(err error) { b.mismatched = append(b.mismatched, fmt.Sprintf("%s: %v", s.Name, err)) }
	if s.Kind != layout.Matrix {
		var v []float32
		var err error
		if b.packed != nil && b.packed.Holds(e.t) {
			v, err = b.packed.ReadF32(e.t)
		} else {
			v, err = b.ck.ReadF32(e.t)
		}
		if err != nil {
			fail(err)
			return
		}
		if s.Kind == layout.ALog {
			// Only the first H (the alternative shape's one dimension) entries are used.
			v = v[:s.Alt[0]]
		}
		e.vec = nn.F32(v)
		if narrowGain(s.Key, e.t.DType) {
			// Values widened from 16 bits narrow back exactly; a failure would be a reader
			// bug, and holding float32 would exceed what the plan charged (heldBytes).
			var ok bool
			if e.vec, ok = nn.Narrow(v, e.t.DType == safetensors.F16); !ok {
				fail(fmt.Errorf("%v values do not narrow back to %v", e.t.DType, e.t.DType))
			}
		}
		return
	}
	if store != nil {
		m, ok := store.Matrix(s.Name)
		if s.Name == layout.EmbedName {
			m, ok = store.Embedding(), true
		}
		if !ok {
			b.mismatched = append(b.mismatched, s.Name+": not served by the trunk store")
			return
		}
		e.mat = m
		return
	}
	data, err := b.ck.Bytes(e.t)
	if err != nil {
		fail(err)
		return
	}
	m, err := e.ctor(s.Rows, s.Cols, data)
	if err != nil {
		fail(err)
		return
	}
	e.mat = m
	if pool != nil { // a nil *parallel.Pool in the interface would not read as nil
		e.mat = quant.OnRunner(m, pool)
	}
}

// values indexes bound tensors by their table key.
type values map[string]*bound

func index(list []bound) values {
	v := make(values, len(list))
	for i := range list {
		v[list[i].spec.Key] = &list[i]
	}
	return v
}

// mat and vec return a bound tensor's value, nil when it is not in the table (an optional
// tensor this configuration does not have) or failed (already reported).
func (v values) mat(key string) quant.Matrix {
	if e := v[key]; e != nil {
		return e.mat
	}
	return nil
}

func (v values) vec(key string) []float32 {
	if e := v[key]; e != nil {
		return e.vec.Float32()
	}
	return nil
}

// gain returns an RMSNorm gain as held (see gain, the function).
func (v values) gain(key string) nn.Vec {
	if e := v[key]; e != nil {
		return e.vec
	}
	return nn.Vec{}
}

// gain reports whether the vector with this table key is an RMSNorm gain. The built model holds
// gains at their stored width (nn.Vec, widened exactly where used), so a BF16 or F16 gain costs
// 2 bytes per element: the residual stream's and the final norms are built from values.gain;
// those inside attention and moe (q_a, kv_a, o_norm, routed_expert_norm) are handed over as
// float32, as those packages' exported weight types take them, and narrowed back exactly by
// their constructors (nn.Narrowest), which keep no float32 copy.
func gain(key string) bool {
	switch key {
	case "model.norm.weight", "input_layernorm.weight", "post_attention_layernorm.weight",
		"self_attn.q_a_layernorm.weight", "self_attn.kv_a_layernorm.weight", "self_attn.o_norm.weight",
		"block_sparse_moe.routed_expert_norm.weight":
		return true
	}
	return false
}

// narrowGain reports whether a vector with this table key stored as d is held at 2 bytes an
// element: an RMSNorm gain stored in BF16 or F16.
func narrowGain(key string, d safetensors.DType) bool {
	return gain(key) && (d == safetensors.BF16 || d == safetensors.F16)
}

// attnResVector reports whether the vector with this table key is an AttnRes key norm or
// pseudo-query: build folds each pair into one float32 vector of their common width
// (nn.NewAttnRes), 2 bytes per stored element whatever the dtype.
func attnResVector(key string) bool {
	switch key {
	case "model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight",
		"self_attention_res_norm.weight", "self_attention_res_proj.weight",
		"mlp_res_norm.weight", "mlp_res_proj.weight":
		return true
	}
	return false
}

// heldBytes is what the built model holds for a vector of n elements stored as d: the side
// bytes the trunk plan charges (§8.5). Every other vector is held as float32.
func heldBytes(key string, d safetensors.DType, n int64) int64 {
	switch {
	case attnResVector(key), narrowGain(key, d):
		return 2 * n
	}
	return 4 * n
}

// ClassInfo counts the tensors of one class.
type ClassInfo struct {
	Tensors int   // checkpoint tensors bound (an MXFP4 matrix's packed and scale tensors count as two)
	Params  int64 // stored parameters (A_log's padding included, as in §3.5's resident set)
	Bytes   int64 // bytes in the checkpoint
}

// Info counts a bound model's tensors by class (§3.4). What one session holds is part of the
// memory plan (Plan.KDAStateBytes, Plan.MLABytesPerPosition).
type Info struct {
	EmbedHead ClassInfo // embedding, lm_head, final norm, output AttnRes pair
	Trunk     ClassInfo // all per-layer tensors except routed experts
	Experts   ClassInfo // routed experts
	// Params and Bytes are the sums over the three classes.
	Params, Bytes int64
}

// Info returns the model's parameter and byte counts.
func (m *Model) Info() Info { return m.info }

func (m *Model) computeInfo(b *binder) Info {
	in := Info{EmbedHead: b.counts[layout.EmbedHead], Trunk: b.counts[layout.Trunk], Experts: b.counts[layout.Experts]}
	for _, c := range b.counts {
		in.Params += c.Params
		in.Bytes += c.Bytes
	}
	return in
}
