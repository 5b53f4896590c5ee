package attention

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/opfix"
	"github.com/k3-project/k3/quant"
)

// mlaFromFixture binds ops/mla.json (prefix "") or the attention part of
// ops/layer_mla.json (prefix "self_attn_").
func mlaFromFixture(t testing.TB, f *opfix.Fixture, prefix string, workers int, hideDecoder bool) *MLA {
	t.Helper()
	const E, Hm, Rq, Rkv, dn, dr, dv = 128, 4, 64, 32, 24, 8, 16
	g := func(name string, rows, cols int) quant.Matrix {
		m := f.Matrix(prefix+name, rows, cols)
		if hideDecoder {
			return opaque{m}
		}
		return m
	}
	cfg := MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
		OutGate: true, RMSEps: 1e-5, Workers: workers}
	w := MLAWeights{
		QA: g("q_a_proj_weight", Rq, E), QANorm: f.F32(prefix+"q_a_layernorm_weight", Rq),
		QB: g("q_b_proj_weight", Hm*(dn+dr), Rq), KVA: g("kv_a_proj_with_mqa_weight", Rkv+dr, E),
		KVANorm: f.F32(prefix+"kv_a_layernorm_weight", Rkv), KVB: g("kv_b_proj_weight", Hm*(dn+dv), Rkv),
		O: g("o_proj_weight", E, Hm*dv), G: g("g_proj_weight", Hm*dv, E),
	}
	m, err := NewMLA(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// opaque hides every method but quant.Matrix's, forcing the bind-time
// extraction path of the key half.
type opaque struct{ m quant.Matrix }

func (o opaque) Format() quant.Format                                 { return o.m.Format() }
func (o opaque) Rows() int                                            { return o.m.Rows() }
func (o opaque) Cols() int                                            { return o.m.Cols() }
func (o opaque) MatVec(dst, x []float32)                              { o.m.MatVec(dst, x) }
func (o opaque) MatMul(dst []float32, stride int, x []float32, n int) { o.m.MatMul(dst, stride, x, n) }
func (o opaque) Slice(lo, hi int) quant.Matrix                        { return opaque{o.m.Slice(lo, hi)} }

func TestMLAFixture(t *testing.T) {
	f := opfix.Load(t, "mla")
	if s := f.Scalar("scale"); float32(s) != mlaFromFixture(t, f, "", 1, false).scale {
		t.Fatalf("fixture scale %v, layer scale %v", s, mlaFromFixture(t, f, "", 1, false).scale)
	}
	for _, hide := range []bool{false, true} {
		m := mlaFromFixture(t, f, "", 1, hide)
		c := m.NewCache()
		in := f.F32("in", 1, 6, 128)
		out := make([]float32, len(in))
		if err := m.Forward(out, in, 6, c); err != nil {
			t.Fatal(err)
		}
		tag := map[bool]string{false: "mla", true: "mla(extracted key half)"}[hide]
		opfix.Compare(t, f.Tol, tag+" out", out, f.F32("out", 1, 6, 128))
		var lat, rope []float32
		for s := range c.Len() {
			lat = append(lat, c.Latent(s)...)
			rope = append(rope, c.KRope(s)...)
		}
		opfix.Compare(t, f.Tol, tag+" kv_latent", lat, f.F32("kv_latent", 1, 6, 32))
		opfix.Compare(t, f.Tol, tag+" k_rope", rope, f.F32("k_rope", 1, 6, 8))
	}
}

// The two key-half paths (on-demand DecodeRow and the bind-time copy) are
// the same numbers, so they must agree bit for bit.
func TestMLAKeyHalfPathsBitIdentical(t *testing.T) {
	f := opfix.Load(t, "mla")
	in := f.F32("in", 1, 6, 128)
	var ref []float32
	for _, hide := range []bool{false, true} {
		m := mlaFromFixture(t, f, "", 1, hide)
		out := make([]float32, len(in))
		if err := m.Forward(out, in, 6, m.NewCache()); err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = out
			continue
		}
		testkit.RequireSameBits(t, "out", out, ref)
	}
}

// E1 for MLA: at once ≡ one by one ≡ chunks ≡ worker counts, including the
// cache contents; and snapshot (Clone/Truncate) restores.
func TestMLAChunkingBitIdentical(t *testing.T) {
	f := opfix.Load(t, "mla")
	const T = 6
	in := f.F32("in", 1, T, 128)
	run := func(workers int, chunks []int) ([]float32, *MLACache) {
		m := mlaFromFixture(t, f, "", workers, false)
		c := m.NewCache()
		out := inChunks(t, 128, in, chunks, func(dst, x []float32, n int) error { return m.Forward(dst, x, n, c) })
		if c.Len() != T {
			t.Fatalf("chunks %v: cache of %d positions, want %d", chunks, c.Len(), T)
		}
		return out, c
	}
	refOut, refC := run(1, []int{T})
	for _, tc := range []struct {
		workers int
		chunks  []int
	}{
		{1, []int{1, 1, 1, 1, 1, 1}}, {1, []int{2, 4}}, {1, []int{5, 1}},
		{2, []int{T}}, {2, []int{1, 1, 1, 1, 1, 1}}, {3, []int{3, 3}},
	} {
		t.Run(fmt.Sprintf("w%d_%v", tc.workers, tc.chunks), func(t *testing.T) {
			out, c := run(tc.workers, tc.chunks)
			testkit.RequireSameBits(t, "out", out, refOut)
			testkit.RequireSameBits(t, "cache rows", c.KV, refC.KV)
		})
	}
	// Roll back two positions and replay them.
	m := mlaFromFixture(t, f, "", 1, false)
	c := refC.Clone()
	if err := c.Truncate(4); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 2*128)
	if err := m.Forward(out, in[4*128:], 2, c); err != nil {
		t.Fatal(err)
	}
	testkit.RequireSameBits(t, "replayed out", out, refOut[4*128:])
	if err := c.Truncate(7); err == nil {
		t.Error("Truncate beyond the cache accepted")
	}
}

func TestMLABadInput(t *testing.T) {
	f := opfix.Load(t, "mla")
	m := mlaFromFixture(t, f, "", 1, false)
	if err := m.Forward(make([]float32, 128), make([]float32, 128), 1, &MLACache{KVLoRA: 31, Rope: 8}); err == nil {
		t.Error("mismatched cache accepted")
	}
	if err := m.Forward(make([]float32, 128), make([]float32, 100), 1, m.NewCache()); err == nil {
		t.Error("short input accepted")
	}
	_, err := NewMLA(m.cfg, MLAWeights{})
	if err == nil {
		t.Error("missing weights accepted")
	}
}

// TestMLAForwardFrom: ForwardFrom fills the cache as ForwardWith does and computes the rows from
// `from` on bit for bit, leaving the earlier rows of dst untouched, after a first call too (so
// queries attend to the cached positions); a from outside [0, T) is an error.
func TestMLAForwardFrom(t *testing.T) {
	f := opfix.Load(t, "mla")
	const T = 6
	in := f.F32("in", 1, T, 128)
	for _, workers := range []int{1, 2} {
		m := mlaFromFixture(t, f, "", workers, false)
		ref := m.NewCache()
		want := make([]float32, len(in))
		if err := m.ForwardWith(want[:2*128], in[:2*128], 2, ref, NewWorkspace()); err != nil {
			t.Fatal(err)
		}
		if err := m.ForwardWith(want[2*128:], in[2*128:], T-2, ref, NewWorkspace()); err != nil {
			t.Fatal(err)
		}
		for from := range T - 2 {
			c := m.NewCache()
			got := make([]float32, len(in))
			if err := m.ForwardWith(got[:2*128], in[:2*128], 2, c, NewWorkspace()); err != nil {
				t.Fatal(err)
			}
			rest := got[2*128:]
			for i := range rest {
				rest[i] = -7
			}
			if err := m.ForwardFrom(rest, in[2*128:], T-2, c, NewWorkspace(), from); err != nil {
				t.Fatal(err)
			}
			testkit.RequireSameBits(t, fmt.Sprintf("w%d from %d: cache", workers, from), c.KV, ref.KV)
			testkit.RequireSameBits(t, fmt.Sprintf("w%d from %d: rows", workers, from), rest[from*128:], want[(2+from)*128:])
			for i, v := range rest[:from*128] {
				if v != -7 {
					t.Fatalf("w%d from %d: row element %d written", workers, from, i)
				}
			}
		}
		c := m.NewCache()
		for _, from := range []int{-1, T} {
			if err := m.ForwardFrom(make([]float32, len(in)), in, T, c, NewWorkspace(), from); err == nil {
				t.Errorf("from %d of %d positions: no error", from, T)
			}
		}
	}
}

// TestMLABlockPathBitIdentical runs an MLA whose latent width takes the
// three-position block path (KVLoRA 64) over a prompt at once, one
// position at a time (never the block path) and in uneven chunks (the
// block path with cached positions before it); outputs and caches agree bit
// for bit.
func TestMLABlockPathBitIdentical(t *testing.T) {
	const E, Hm, Rq, Rkv, dn, dr, dv, T = 64, 3, 32, 64, 16, 8, 16, 11
	r := rand.New(rand.NewPCG(53, 54))
	cfg := MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
		OutGate: true, RMSEps: 1e-5}
	w := (&benchWeights{rng: r}).mla(t, cfg) // small bf16 weights, as the benchmark's
	x := testkit.Gaussian(r, T*E, 1)
	run := func(w MLAWeights, workers int, chunks []int) ([]float32, *MLACache) {
		return runMLA(t, cfg, w, workers, x, chunks)
	}
	refOut, refC := run(w, 1, slices.Repeat([]int{1}, T))
	for _, tc := range []struct {
		workers int
		chunks  []int
	}{{1, []int{T}}, {2, []int{T}}, {1, []int{4, 7}}, {3, []int{2, 9}}} {
		out, c := run(w, tc.workers, tc.chunks)
		testkit.RequireSameBits(t, fmt.Sprintf("w%d %v out", tc.workers, tc.chunks), out, refOut)
		testkit.RequireSameBits(t, fmt.Sprintf("w%d %v cache", tc.workers, tc.chunks), c.KV, refC.KV)
	}
	// The bind-time copy of the key half (kv_b without DecodeRow) feeds the
	// block path from its own storage.
	hidden := w
	hidden.KVB = opaque{w.KVB}
	out, c := run(hidden, 2, []int{T})
	testkit.RequireSameBits(t, "extracted key half out", out, refOut)
	testkit.RequireSameBits(t, "extracted key half cache", c.KV, refC.KV)
	// ForwardFrom after a cached prefix: the block path with its queries
	// shifted by from and by the prefix.
	const pre = 2
	for _, from := range []int{0, 1, 4} {
		mc := cfg
		mc.Workers = 2
		m, err := NewMLA(mc, w)
		if err != nil {
			t.Fatal(err)
		}
		c := m.NewCache()
		out := make([]float32, T*E)
		if err := m.Forward(out[:pre*E], x[:pre*E], pre, c); err != nil {
			t.Fatal(err)
		}
		if err := m.ForwardFrom(out[pre*E:], x[pre*E:], T-pre, c, NewWorkspace(), from); err != nil {
			t.Fatal(err)
		}
		testkit.RequireSameBits(t, fmt.Sprintf("from %d rows", from), out[(pre+from)*E:], refOut[(pre+from)*E:])
		testkit.RequireSameBits(t, fmt.Sprintf("from %d cache", from), c.KV, refC.KV)
	}
}

// CopyFrom restores a snapshot bit for bit into an existing cache, and
// refuses a cache of another shape.
func TestMLACacheCopyFrom(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const E, Hm, Rq, Rkv, dn, dr, dv = 24, 2, 16, 20, 8, 4, 8
	cfg := MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv, RMSEps: 1e-5}
	m, err := NewMLA(cfg, mlaWeights(r, cfg, bf16s(t, r)))
	if err != nil {
		t.Fatal(err)
	}
	x := testkit.Gaussian(r, 5*E, 1)
	c := m.NewCache()
	if err := m.Forward(make([]float32, 3*E), x[:3*E], 3, c); err != nil {
		t.Fatal(err)
	}
	snap := c.Clone()
	want := make([]float32, 2*E)
	if err := m.Forward(want, x[3*E:], 2, c); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyFrom(snap); err != nil {
		t.Fatal(err)
	}
	testkit.RequireSameBits(t, "restored cache", c.KV, snap.KV)
	got := make([]float32, 2*E)
	if err := m.Forward(got, x[3*E:], 2, c); err != nil {
		t.Fatal(err)
	}
	testkit.RequireSameBits(t, "replay after CopyFrom", got, want)
	if err := c.CopyFrom(&MLACache{KVLoRA: Rkv + 1, Rope: dr}); err == nil {
		t.Error("CopyFrom of a cache of another shape accepted")
	}
}
