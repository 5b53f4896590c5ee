package attention

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAxpyBlock3 holds the three-row block kernel to axpyRows on each row:
// every accumulator gets the same additions in the same order. Rows of
// ±2^40 and tiny values make a wrong order or a dropped addition visible.
func TestAxpyBlock3(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, w := range []int{64, 128, 256} {
		for _, k := range []int{0, 1, 5, 37} {
			t.Run(fmt.Sprintf("w%d_k%d", w, k), func(t *testing.T) {
				as, ak, bs := w+8, k+3, w+5
				b := make([]float32, max(1, k)*bs)
				for i := range b {
					b[i] = float32(r.NormFloat64())
					if r.IntN(7) == 0 {
						b[i] = float32(math.Ldexp(1, 40) * float64(1-2*r.IntN(2)))
					}
				}
				a := make([]float64, 3*ak)
				for i := range a {
					a[i] = float64(float32(r.NormFloat64()))
				}
				acc := make([]float64, 3*as)
				for i := range acc {
					acc[i] = float64(float32(r.NormFloat64()))
				}
				want := append([]float64(nil), acc...)
				if !axpyBlock3Applies(w) {
					t.Skip("the block kernel does not apply on this CPU")
				}
				axpyBlock3(acc, as, a, ak, b, bs, k, w)
				rows := make([][]float32, k)
				for j := range rows {
					rows[j] = b[j*bs : j*bs+w]
				}
				for tt := range 3 {
					axpyRows(want[tt*as:tt*as+w], a[tt*ak:tt*ak+k], rows)
				}
				for i := range acc {
					if math.Float64bits(acc[i]) != math.Float64bits(want[i]) {
						t.Fatalf("acc[%d] = %v, axpyRows %v", i, acc[i], want[i])
					}
				}
			})
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
	bw := &benchWeights{rng: rand.New(rand.NewPCG(53, 54))}
	cfg := MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
		OutGate: true, RMSEps: 1e-5}
	w := bw.mla(t, cfg)
	x := bw.vec(T*E, 1)
	run := func(w MLAWeights, workers int, chunks []int) ([]float32, *MLACache) {
		mc := cfg
		mc.Workers = workers
		m, err := NewMLA(mc, w)
		if err != nil {
			t.Fatal(err)
		}
		c := m.NewCache()
		out := make([]float32, T*E)
		pos := 0
		for _, n := range chunks {
			if err := m.Forward(out[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n, c); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		return out, c
	}
	one := make([]int, T)
	for i := range one {
		one[i] = 1
	}
	refOut, refC := run(w, 1, one)
	for _, tc := range []struct {
		workers int
		chunks  []int
	}{{1, []int{T}}, {2, []int{T}}, {1, []int{4, 7}}, {3, []int{2, 9}}} {
		out, c := run(w, tc.workers, tc.chunks)
		sameBits(t, fmt.Sprintf("w%d %v out", tc.workers, tc.chunks), out, refOut)
		sameBits(t, fmt.Sprintf("w%d %v cache", tc.workers, tc.chunks), c.KV, refC.KV)
	}
	// The bind-time copy of the key half (kv_b without DecodeRow) feeds the
	// block path from its own storage.
	hidden := w
	hidden.KVB = opaque{w.KVB}
	out, c := run(hidden, 2, []int{T})
	sameBits(t, "extracted key half out", out, refOut)
	sameBits(t, "extracted key half cache", c.KV, refC.KV)
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
		sameBits(t, fmt.Sprintf("from %d rows", from), out[(pre+from)*E:], refOut[(pre+from)*E:])
		sameBits(t, fmt.Sprintf("from %d cache", from), c.KV, refC.KV)
	}
}
