package attention

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/k3-project/k3/internal/kernels/parallel"
	"github.com/k3-project/k3/internal/testkit"
)

// TestForwardBatchAsAlone: sequences at different positions (different prefixes run alone
// first) with different numbers of new rows, run together through ForwardBatch, get every
// output bit and every state bit they get from their own ForwardWith calls, for KDA and MLA,
// on one worker and on a pool with heads forced to split.
func TestForwardBatchAsAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 4))
	const E = 48
	kc := KDAConfig{Hidden: E, Heads: 3, HeadDim: 8, ConvK: 4, GateLB: -5, RMSEps: 1e-5}
	mc := MLAConfig{Hidden: E, Heads: 3, QLoRA: 16, KVLoRA: 16, NoPE: 8, Rope: 4, VHead: 8, OutGate: true, RMSEps: 1e-5}
	kw := kdaWeights(r, kc, kc.HeadDim, bf16s(t, r))
	mw := mlaWeights(r, mc, bf16s(t, r))
	prefix := []int{0, 5, 1, 9, 3}     // positions each sequence has before the batch
	lens := []int{1, 1, 4, 1, 3}       // its new rows in the batch
	xs := make([][]float32, len(lens)) // prefix and new rows of each sequence
	for i := range xs {
		xs[i] = testkit.Gaussian(r, (prefix[i]+lens[i])*E, 1)
	}
	for _, run := range []struct{ workers, minWork, pool int }{{1, parallel.MinWork, 0}, {2, 1, 2}} {
		t.Run(fmt.Sprintf("workers=%d/minWork=%d", run.workers, run.minWork), func(t *testing.T) {
			pool := parallel.NewPool(run.pool)
			defer pool.Close()
			kc, mc := kc, mc
			kc.Workers, kc.Pool, mc.Workers, mc.Pool = run.workers, pool, run.workers, pool
			k, err := NewKDA(kc, kw)
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewMLA(mc, mw)
			if err != nil {
				t.Fatal(err)
			}
			k.minWork, m.minWork = run.minWork, run.minWork
			ws := NewWorkspace()
			n := len(lens)
			soloK, batchK := make([]*KDAState, n), make([]*KDAState, n)
			soloM, batchM := make([]*MLACache, n), make([]*MLACache, n)
			var wantK, wantM, x []float32
			for i := range n {
				soloK[i], batchK[i], soloM[i], batchM[i] = k.NewState(), k.NewState(), m.NewCache(), m.NewCache()
				pre, nw := xs[i][:prefix[i]*E], xs[i][prefix[i]*E:]
				if prefix[i] > 0 {
					for _, st := range []*KDAState{soloK[i], batchK[i]} {
						if err := k.ForwardWith(make([]float32, len(pre)), pre, prefix[i], st, ws); err != nil {
							t.Fatal(err)
						}
					}
					for _, c := range []*MLACache{soloM[i], batchM[i]} {
						if err := m.ForwardWith(make([]float32, len(pre)), pre, prefix[i], c, ws); err != nil {
							t.Fatal(err)
						}
					}
				}
				ko, mo := make([]float32, len(nw)), make([]float32, len(nw))
				if err := k.ForwardWith(ko, nw, lens[i], soloK[i], ws); err != nil {
					t.Fatal(err)
				}
				if err := m.ForwardWith(mo, nw, lens[i], soloM[i], ws); err != nil {
					t.Fatal(err)
				}
				wantK, wantM, x = append(wantK, ko...), append(wantM, mo...), append(x, nw...)
			}
			gotK, gotM := make([]float32, len(x)), make([]float32, len(x))
			if err := k.ForwardBatch(gotK, x, lens, batchK, ws); err != nil {
				t.Fatal(err)
			}
			if err := m.ForwardBatch(gotM, x, lens, batchM, ws); err != nil {
				t.Fatal(err)
			}
			testkit.RequireSameBits(t, "kda outputs", gotK, wantK)
			testkit.RequireSameBits(t, "mla outputs", gotM, wantM)
			for i := range n {
				testkit.RequireSameBits(t, fmt.Sprintf("kda state %d", i),
					append(append(append(batchK[i].S, batchK[i].ConvQ...), batchK[i].ConvK...), batchK[i].ConvV...),
					append(append(append(soloK[i].S, soloK[i].ConvQ...), soloK[i].ConvK...), soloK[i].ConvV...))
				testkit.RequireSameBits(t, fmt.Sprintf("mla cache %d", i), batchM[i].KV, soloM[i].KV)
			}
		})
	}
}

// TestForwardBatchRefuses: mismatched lists, empty sequences and one MLA cache given twice are
// refused before anything is computed.
func TestForwardBatchRefuses(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 5))
	const E = 48
	kc := KDAConfig{Hidden: E, Heads: 3, HeadDim: 8, ConvK: 4, GateLB: -5, RMSEps: 1e-5}
	mc := MLAConfig{Hidden: E, Heads: 3, QLoRA: 16, KVLoRA: 16, NoPE: 8, Rope: 4, VHead: 8, RMSEps: 1e-5}
	k, err := NewKDA(kc, kdaWeights(r, kc, kc.HeadDim, bf16s(t, r)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMLA(mc, mlaWeights(r, mc, bf16s(t, r)))
	if err != nil {
		t.Fatal(err)
	}
	ws := NewWorkspace()
	x, dst := make([]float32, 2*E), make([]float32, 2*E)
	st, c := k.NewState(), m.NewCache()
	if k.ForwardBatch(dst, x, []int{1, 1}, []*KDAState{st}, ws) == nil {
		t.Error("kda: two lengths for one state accepted")
	}
	if k.ForwardBatch(dst, x, []int{2, 0}, []*KDAState{st, k.NewState()}, ws) == nil {
		t.Error("kda: an empty sequence accepted")
	}
	if m.ForwardBatch(dst, x, []int{1, 1}, []*MLACache{c, c}, ws) == nil {
		t.Error("mla: one cache for two sequences accepted")
	}
	if c.Len() != 0 || testkit.Digest(st.S) != testkit.Digest(k.NewState().S) {
		t.Error("a refused batch changed a state")
	}
}
