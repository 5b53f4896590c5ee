package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/k3-project/k3/attention"
	"github.com/k3-project/k3/quant"
)

func randMatrix(r *rand.Rand, rows, cols int) quant.Matrix {
	m, err := quant.F32FromFloats(rows, cols, randVec(r, rows*cols, 0.1))
	if err != nil {
		panic(err)
	}
	return m
}

func randVec(r *rand.Rand, n int, s float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * s)
	}
	return v
}

// A KDA layer processes a prompt in one call, then decodes step by step with
// the same state; a snapshot lets a speculative step be undone.
func ExampleKDA() {
	const E, H, D, K = 32, 2, 8, 4
	P := H * D
	r := rand.New(rand.NewPCG(1, 2))
	kda, err := attention.NewKDA(
		attention.KDAConfig{Hidden: E, Heads: H, HeadDim: D, ConvK: K, GateLB: -5, RMSEps: 1e-5, Workers: 2},
		attention.KDAWeights{
			Q: randMatrix(r, P, E), K: randMatrix(r, P, E), V: randMatrix(r, P, E), G: randMatrix(r, P, E),
			B: randMatrix(r, H, E), FA: randMatrix(r, D, E), FB: randMatrix(r, P, D), O: randMatrix(r, E, P),
			QConv: randVec(r, P*K, 0.5), KConv: randVec(r, P*K, 0.5), VConv: randVec(r, P*K, 0.5),
			ALog: randVec(r, H, 0.5), DtBias: randVec(r, P, 0.5), ONorm: randVec(r, D, 1),
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	x := randVec(r, 5*E, 1) // 5 normalised positions

	// Prefill all five positions at once...
	st := kda.NewState()
	all := make([]float32, 5*E)
	if err := kda.Forward(all, x, 5, st); err != nil {
		fmt.Println(err)
		return
	}
	// ...or four, a snapshot, then one step: the last output is identical.
	st2 := kda.NewState()
	four := make([]float32, 4*E)
	_ = kda.Forward(four, x[:4*E], 4, st2)
	snap := st2.Clone()
	step := make([]float32, E)
	_ = kda.Forward(step, x[4*E:], 1, st2)
	fmt.Println("step == prefill:", sameBits(step, all[4*E:]))

	_ = st2.CopyFrom(snap) // undo the step
	_ = kda.Forward(step, x[4*E:], 1, st2)
	fmt.Println("replay == prefill:", sameBits(step, all[4*E:]))
	// Output:
	// step == prefill: true
	// replay == prefill: true
}

func sameBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// An MLA layer keeps only the normalised latent and the shared rope key per
// position; decoding appends one row per step.
func ExampleMLA() {
	const E, Hm, Rq, Rkv, dn, dr, dv = 32, 2, 16, 8, 8, 4, 8
	r := rand.New(rand.NewPCG(3, 4))
	mla, err := attention.NewMLA(
		attention.MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv,
			OutGate: true, RMSEps: 1e-5},
		attention.MLAWeights{
			QA: randMatrix(r, Rq, E), QANorm: randVec(r, Rq, 1), QB: randMatrix(r, Hm*(dn+dr), Rq),
			KVA: randMatrix(r, Rkv+dr, E), KVANorm: randVec(r, Rkv, 1), KVB: randMatrix(r, Hm*(dn+dv), Rkv),
			O: randMatrix(r, E, Hm*dv), G: randMatrix(r, Hm*dv, E),
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	cache := mla.NewCache()
	x := randVec(r, 3*E, 1)
	out := make([]float32, 3*E)
	if err := mla.Forward(out, x, 3, cache); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("cached positions:", cache.Len(), "floats per position:", len(cache.KV)/cache.Len())
	// Output:
	// cached positions: 3 floats per position: 12
}

// A decode loop reuses one Workspace for every layer it runs, so steady
// steps allocate no scratch; the results equal those of Forward.
func ExampleWorkspace() {
	const E, Hm, Rq, Rkv, dn, dr, dv = 32, 2, 16, 8, 8, 4, 8
	r := rand.New(rand.NewPCG(5, 6))
	mla, err := attention.NewMLA(
		attention.MLAConfig{Hidden: E, Heads: Hm, QLoRA: Rq, KVLoRA: Rkv, NoPE: dn, Rope: dr, VHead: dv, RMSEps: 1e-5},
		attention.MLAWeights{
			QA: randMatrix(r, Rq, E), QANorm: randVec(r, Rq, 1), QB: randMatrix(r, Hm*(dn+dr), Rq),
			KVA: randMatrix(r, Rkv+dr, E), KVANorm: randVec(r, Rkv, 1), KVB: randMatrix(r, Hm*(dn+dv), Rkv),
			O: randMatrix(r, E, Hm*dv),
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	x := randVec(r, 4*E, 1)
	ref := make([]float32, 4*E)
	_ = mla.Forward(ref, x, 4, mla.NewCache())

	ws := attention.NewWorkspace() // one per goroutine (session)
	cache := mla.NewCache()
	out := make([]float32, 4*E)
	for t := range 4 {
		if err := mla.ForwardWith(out[t*E:(t+1)*E], x[t*E:(t+1)*E], 1, cache, ws); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("steps == prefill:", sameBits(out, ref))
	// Output:
	// steps == prefill: true
}
