package cache_test

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/cfs1"
	"github.com/k3-project/k3/quant/rans"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func matrix(t testing.TB, ck *safetensors.Checkpoint, name string, rows, cols int) quant.Matrix {
	t.Helper()
	tn, err := ck.Require(name)
	require.NoError(t, err)
	b, err := ck.Bytes(tn)
	require.NoError(t, err)
	var m quant.Matrix
	switch tn.DType {
	case safetensors.BF16:
		m, err = quant.NewBF16(rows, cols, b)
	case safetensors.F32:
		m, err = quant.NewF32(rows, cols, b)
	default:
		require.FailNowf(t, "unexpected dtype", "%s: dtype %v", name, tn.DType)
	}
	require.NoError(t, err, name)
	return m
}

func vector(t testing.TB, ck *safetensors.Checkpoint, name string) []float32 {
	t.Helper()
	tn, err := ck.Require(name)
	require.NoError(t, err)
	v, err := ck.ReadF32(tn)
	require.NoError(t, err)
	return v
}

func moeConfig(c *config.Config, l, workers int) moe.Config {
	return moe.Config{Layer: l, Hidden: c.Hidden, Latent: c.Latent, Inter: c.MoEInter, TopK: c.TopK,
		RoutedScale: float32(c.RoutedScale), Renorm: c.MoERenorm, LatentNorm: c.LatentNorm,
		Beta1: float32(c.SiTUBeta), Beta2: float32(c.SiTULinearBeta), RMSEps: float32(c.RMSEps), Workers: workers}
}

// openModelDir loads the configuration of the model in dir and opens its
// checkpoint, closed when the test ends.
func openModelDir(t testing.TB, dir string) (*config.Config, *safetensors.Checkpoint) {
	t.Helper()
	c, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	ck, err := safetensors.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { ck.Close() })
	return c, ck
}

// stepInputs draws the inputs of steps decode steps (one token each) and then
// of one prefill chunk of prefillT tokens, hidden normal values a token.
func stepInputs(r *rand.Rand, hidden, steps, prefillT int) [][]float32 {
	inputs := make([][]float32, steps+1)
	for i := range inputs {
		T := 1
		if i == steps {
			T = prefillT
		}
		inputs[i] = make([]float32, T*hidden)
		for j := range inputs[i] {
			inputs[i][j] = float32(r.NormFloat64())
		}
	}
	return inputs
}

// mappedOutputs runs every input through every layer's MoE on workers workers
// over the mapped experts src: the reference outputs, by layer and input.
func mappedOutputs(t *testing.T, c *config.Config, layers []int, workers int, weights map[int]moe.Weights, src *moe.MemExperts, inputs [][]float32) map[[2]int][]float32 {
	t.Helper()
	want := map[[2]int][]float32{}
	for _, l := range layers {
		m, err := moe.New(moeConfig(c, l, workers), weights[l], src)
		require.NoError(t, err)
		for i, x := range inputs {
			out := make([]float32, len(x))
			require.NoError(t, m.Forward(out, x, len(x)/c.Hidden))
			want[[2]int{l, i}] = out
		}
	}
	return want
}

// requireSameSteps runs inputs as token steps through every layer's MoE with
// its experts from s on workers workers (calling prefetch, when not nil,
// before layer index li's forward) and requires each output to have the bits
// of want's; name labels a failure.
func requireSameSteps(t *testing.T, name string, c *config.Config, layers []int, workers int, weights map[int]moe.Weights,
	s *cache.Store, inputs [][]float32, want map[[2]int][]float32, prefetch func(li int)) {
	t.Helper()
	for i, x := range inputs {
		s.BeginStep()
		for li, l := range layers {
			if prefetch != nil {
				prefetch(li)
			}
			m, err := moe.New(moeConfig(c, l, workers), weights[l], s)
			require.NoError(t, err)
			out := make([]float32, len(x))
			require.NoError(t, m.Forward(out, x, len(x)/c.Hidden), name)
			testkit.RequireSameBits(t, fmt.Sprintf("%s: layer %d input %d", name, l, i), out, want[[2]int{l, i}])
		}
	}
}

// eachMappedModel runs test as a subtest on every fixture model, with what
// mappedModel returns for it.
func eachMappedModel(t *testing.T, test func(t *testing.T, c *config.Config, ck *safetensors.Checkpoint, layers []int, weights map[int]moe.Weights, memSrc *moe.MemExperts)) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, ck, layers, weights, memSrc := mappedModel(t, dir)
			test(t, c, ck, layers, weights, memSrc)
		})
	}
}

// mappedModel opens the fixture model dir (closed when the test ends) and
// returns its configuration, checkpoint, MoE layers, their weights and their
// experts mapped from the checkpoint: the reference the Store's layers must
// reproduce bit for bit.
func mappedModel(t *testing.T, dir string) (*config.Config, *safetensors.Checkpoint, []int, map[int]moe.Weights, *moe.MemExperts) {
	t.Helper()
	c, ck := openModelDir(t, dir)
	layers := moeLayers(c)
	weights := map[int]moe.Weights{}
	mem := map[int][]moe.Expert{}
	for _, l := range layers {
		weights[l] = moeWeights(t, ck, c, l)
		mem[l] = mappedExperts(t, ck, c, l)
	}
	return c, ck, layers, weights, moe.NewMemExperts(mem)
}

// modelShapes returns the shapes of c's expert matrices.
func modelShapes(c *config.Config) *cache.Shapes {
	return &cache.Shapes{W1: [2]int{c.MoEInter, c.Latent}, W2: [2]int{c.Latent, c.MoEInter}, W3: [2]int{c.MoEInter, c.Latent}}
}

// moeLayers lists c's MoE layers.
func moeLayers(c *config.Config) []int {
	var layers []int
	for l := c.FirstDense; l < c.NumLayers; l++ {
		layers = append(layers, l)
	}
	return layers
}

func moeWeights(t testing.TB, ck *safetensors.Checkpoint, c *config.Config, l int) moe.Weights {
	p := layout.LayerPrefix(l) + "block_sparse_moe."
	E, SI := c.Hidden, c.NumShared*c.MoEInter
	w := moe.Weights{
		Gate: matrix(t, ck, p+"gate.weight", c.NumExperts, E),
		Bias: vector(t, ck, p+"gate.e_score_correction_bias"),
		Down: matrix(t, ck, p+"routed_expert_down_proj.weight", c.Latent, E),
		Up:   matrix(t, ck, p+"routed_expert_up_proj.weight", E, c.Latent),
	}
	if c.LatentNorm {
		w.Norm = vector(t, ck, p+"routed_expert_norm.weight")
	}
	if SI > 0 {
		w.SharedGate = matrix(t, ck, p+"shared_experts.gate_proj.weight", SI, E)
		w.SharedUp = matrix(t, ck, p+"shared_experts.up_proj.weight", SI, E)
		w.SharedDown = matrix(t, ck, p+"shared_experts.down_proj.weight", E, SI)
	}
	return w
}

func mappedExperts(t testing.TB, ck *safetensors.Checkpoint, c *config.Config, l int) []moe.Expert {
	out := make([]moe.Expert, c.NumExperts)
	for e := range out {
		p := layout.ExpertPrefix(l, e)
		mx := func(w string, rows, cols int) quant.Matrix {
			pt, err := ck.Require(p + w + ".weight_packed")
			require.NoError(t, err)
			st, err := ck.Require(p + w + ".weight_scale")
			require.NoError(t, err)
			pb, err := ck.Bytes(pt)
			require.NoError(t, err)
			sb, err := ck.Bytes(st)
			require.NoError(t, err)
			m, err := quant.NewMXFP4(rows, cols, pb, sb)
			require.NoError(t, err)
			return m
		}
		out[e] = moe.Expert{W1: mx("w1", c.MoEInter, c.Latent), W2: mx("w2", c.Latent, c.MoEInter), W3: mx("w3", c.MoEInter, c.Latent)}
	}
	return out
}

// Every fixture model's MoE layers give bit-identical outputs with experts
// from the Store as with the mapped experts, for budgets 0, TopK + 1 slots,
// half and all experts, LRU and S3-FIFO, 1 and 2 workers, decode steps and
// a prefill chunk whose union exceeds the small caches (waves).
func TestModelLayersBitIdentical(t *testing.T) {
	eachMappedModel(t, func(t *testing.T, c *config.Config, ck *safetensors.Checkpoint, layers []int, weights map[int]moe.Weights, memSrc *moe.MemExperts) {
		shapes := modelShapes(c)
		probe, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK, Shapes: shapes})
		require.NoError(t, err)
		slot := probe.SlotBytes()
		probe.Close()
		all := len(layers) * c.NumExperts
		r := rand.New(rand.NewPCG(7, 8))
		const steps, prefillT = 4, 24
		inputs := stepInputs(r, c.Hidden, steps, prefillT)
		for _, workers := range []int{1, 2} {
			want := mappedOutputs(t, c, layers, workers, weights, memSrc, inputs) // reference outputs: mapped experts
			for _, slots := range []int{0, c.TopK + 1, all / 2, all} {
				for _, v := range []struct {
					pol      cache.PolicyName
					prefetch bool
				}{{cache.LRU, false}, {cache.S3FIFO, false}, {cache.S3FIFO, true}} {
					pol := v.pol
					name := fmt.Sprintf("workers=%d/slots=%d/%s/prefetch=%v", workers, slots, pol, v.prefetch)
					opts := []cache.Option{cache.WithPolicy(pol), cache.WithReadWorkers(workers)}
					if v.prefetch {
						opts = append(opts, cache.WithSpeculation())
					}
					s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK,
						Budget: int64(slots) * slot, Shapes: shapes}, opts...)
					require.NoError(t, err, name)
					ms := map[int]*moe.MoE{}
					for _, l := range layers {
						ms[l], err = moe.New(moeConfig(c, l, workers), weights[l], s)
						require.NoError(t, err)
					}
					ws := moe.NewWorkspace()
					for i, x := range inputs { // token steps through every layer, as the engine runs them
						s.BeginStep()
						for li, l := range layers {
							if v.prefetch && li+1 < len(layers) { // a (random) lookahead guess for the next layer
								s.Prefetch(layers[li+1], r.Perm(c.NumExperts)[:c.TopK])
							}
							out := make([]float32, len(x))
							require.NoError(t, ms[l].ForwardRoutedWith(out, x, len(x)/c.Hidden, nil, ws), name)
							testkit.RequireSameBits(t, fmt.Sprintf("%s layer %d input %d, against the mapped experts", name, l, i), out, want[[2]int{l, i}])
						}
					}
					st := s.Stats()
					require.Zero(t, st.Leased, name)
					require.Equal(t, st.Run.Requests, st.Run.Hits+st.Run.Misses, name)
					if slots == all {
						require.Zero(t, st.Run.Evictions, name)
					}
					require.NoError(t, s.Close())
				}
			}
		}
	})
}

// Chunk-union prefill through an uncached Store reads each expert once per
// chunk of 64 positions; position by position it reads k experts per
// position. The test logs both byte counts for a 256-position prefill of
// every MoE layer and checks the union never reads more.
func TestChunkUnionPrefillBytes(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		c, ck := openModelDir(t, dir)
		layers := moeLayers(c)
		const T, chunk = 256, 64
		r := rand.New(rand.NewPCG(11, 12))
		x := make([]float32, T*c.Hidden)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		bytesFor := func(step int) int64 {
			s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK}, cache.WithoutDirectIO())
			require.NoError(t, err)
			defer s.Close()
			ws := moe.NewWorkspace()
			for _, l := range layers {
				m, err := moe.New(moeConfig(c, l, 1), moeWeights(t, ck, c, l), s)
				require.NoError(t, err)
				for t0 := 0; t0 < T; t0 += step {
					out := make([]float32, step*c.Hidden)
					require.NoError(t, m.ForwardRoutedWith(out, x[t0*c.Hidden:(t0+step)*c.Hidden], step, nil, ws))
				}
			}
			return s.Stats().Run.BytesRead
		}
		perToken, union := bytesFor(1), bytesFor(chunk)
		t.Logf("%s: 256-position prefill over %d MoE layers reads %d expert bytes position by position, %d in chunks of 64 (%.2f×)",
			filepath.Base(dir), len(layers), perToken, union, float64(perToken)/float64(union))
		require.Less(t, union, perToken)
	}
}

// scratchSizes are the scratch slot counts worth testing for top-k k: one,
// about half, one short of k, and k itself (0, today's default).
func scratchSizes(k int) []int {
	out := []int{0, 1}
	if k/2 > 1 {
		out = append(out, k/2)
	}
	if k-1 > max(1, k/2) {
		out = append(out, k-1)
	}
	return out
}

// With a zero budget, a read scratch of fewer than TopK slots gives every
// fixture model's MoE layers the bits of today's TopK-slot scratch (and of
// the mapped experts), for 1 and 2 workers, decode steps and a prefill
// chunk; the store never holds more than its slots in one call.
func TestScratchSlotsBitIdentical(t *testing.T) {
	eachMappedModel(t, func(t *testing.T, c *config.Config, ck *safetensors.Checkpoint, layers []int, weights map[int]moe.Weights, memSrc *moe.MemExperts) {
		shapes := modelShapes(c)
		r := rand.New(rand.NewPCG(11, 12))
		inputs := stepInputs(r, c.Hidden, 3, 17) // the prefill chunk's union needs several waves even of TopK
		for _, workers := range []int{1, 2} {
			want := mappedOutputs(t, c, layers, workers, weights, memSrc, inputs)
			for _, n := range scratchSizes(c.TopK) {
				name := fmt.Sprintf("workers=%d/scratch=%d", workers, n)
				s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK,
					Shapes: shapes, ScratchSlots: n}, cache.WithReadWorkers(workers))
				require.NoError(t, err, name)
				require.Equal(t, cmp.Or(n, c.TopK), s.MaxBatch(), name)
				requireSameSteps(t, name, c, layers, workers, weights, s, inputs, want, nil)
				st := s.Stats()
				require.Zero(t, st.Leased, name)
				require.Equal(t, st.Run.Requests, st.Run.Misses, name)
				// A caller that asks more than the scratch holds is refused, not served past it.
				if n > 0 && n < c.TopK {
					ids := make([]int, n+1)
					for i := range ids {
						ids[i] = i
					}
					_, _, err := s.Experts(layers[0], ids, nil)
					require.ErrorIs(t, err, cache.ErrBatchTooLarge, name)
				}
				require.NoError(t, s.Close())
			}
		}
	})
}

func TestScratchSlotsPlan(t *testing.T) {
	eb := int64(17_547_264)
	slot := cache.SlotSize(eb)
	p, err := cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 16})
	require.NoError(t, err)
	require.Equal(t, [3]int64{16, 1, 16 * slot}, [3]int64{int64(p.ScratchSlots), int64(p.Waves), p.ScratchBytes})
	p, err = cache.NewPlan(cache.PlanConfig{ExpertBytes: eb, TopK: 16, ScratchSlots: 5})
	require.NoError(t, err)
	require.Equal(t, [3]int64{5, 4, 5 * slot}, [3]int64{int64(p.ScratchSlots), int64(p.Waves), p.ScratchBytes})
	require.Equal(t, p.ScratchBytes, p.Total)
	for _, c := range []cache.PlanConfig{
		{ExpertBytes: eb, TopK: 16, ScratchSlots: 17},
		{ExpertBytes: eb, TopK: 16, ScratchSlots: -1},
		{ExpertBytes: eb, TopK: 16, ScratchSlots: 4, Budget: 20 * slot},
	} {
		_, err := cache.NewPlan(c)
		require.Error(t, err, "%+v", c)
	}
	c, ck := openModelDir(t, testkit.Models(t)[0])
	_, err = cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, ScratchSlots: c.TopK + 1})
	require.ErrorContains(t, err, fmt.Sprintf("ScratchSlots %d: want 1 to TopK = %d", c.TopK+1, c.TopK))
	_, err = cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, ScratchSlots: 1, Budget: 1 << 30})
	require.ErrorContains(t, err, "the scratch is for a zero budget")
}

// BenchmarkScratchWaves is one decode token through every MoE layer with a
// zero budget, for a full scratch and fewer slots (the waves' cost), on
// each fixture model and, when K3_PERF_DIR names one, the perf checkpoint.
func BenchmarkScratchWaves(b *testing.B) {
	dirs := testkit.Models(b)
	if d := os.Getenv(testkit.PerfEnv); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		c, ck := openModelDir(b, dir)
		layers := moeLayers(c)
		ms := map[int]moe.Weights{}
		for _, l := range layers {
			ms[l] = moeWeights(b, ck, c, l)
		}
		x := make([]float32, c.Hidden)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for _, n := range scratchSizes(c.TopK) {
			b.Run(fmt.Sprintf("%s/topk=%d/scratch=%d", filepath.Base(dir), c.TopK, cmp.Or(n, c.TopK)), func(b *testing.B) {
				s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK,
					Shapes: modelShapes(c), ScratchSlots: n})
				require.NoError(b, err)
				defer s.Close()
				mm := map[int]*moe.MoE{}
				for _, l := range layers {
					mm[l], err = moe.New(moeConfig(c, l, 1), ms[l], s)
					require.NoError(b, err)
				}
				out := make([]float32, c.Hidden)
				ws := moe.NewWorkspace()
				for b.Loop() {
					for _, l := range layers {
						if err := mm[l].ForwardRoutedWith(out, x, 1, nil, ws); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// expertWeight is the routed-expert selection of k3 compress-experts.
var expertWeight = regexp.MustCompile(`\.block_sparse_moe\.experts\.[0-9]+\.w[123]\.weight_packed$`)

func selectExperts(name string) (string, bool) {
	if !expertWeight.MatchString(name) {
		return "", false
	}
	return strings.TrimSuffix(name, "_packed") + "_scale", true
}

// repack writes dir with its routed-expert weights entropy-coded.
func repack(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+"-cfs1")
	_, err := rans.Repack(dir, out, rans.RepackOptions{Select: selectExperts, Workers: 2})
	require.NoError(t, err)
	return out
}

// codedRecord returns a nibble-coded (not raw-fallback) expert record of ck.
func codedRecord(t testing.TB, ck *safetensors.Checkpoint) *safetensors.Tensor {
	t.Helper()
	for _, tn := range ck.Tensors() {
		if !expertWeight.MatchString(tn.Name) || len(tn.Shape) != 1 {
			continue
		}
		b, err := ck.Bytes(tn)
		require.NoError(t, err)
		if b[4] == cfs1.ModeNibble {
			return tn
		}
	}
	require.FailNow(t, "no nibble-coded expert record")
	return nil
}

// flipFrequencyBit flips the lowest bit of the first frequency of record tn
// in its shard file: the frequencies then no longer sum to 4096, which the
// decoder always refuses, while the header Inspect reads stays valid.
func flipFrequencyBit(t testing.TB, tn *safetensors.Tensor) {
	t.Helper()
	testkit.FlipBits(t, tn.File, tn.Offset+9, 1)
}

// Every fixture model repacked with coded experts gives MoE layer outputs
// bit-identical to the raw checkpoint's mapped experts through the Store at
// budgets 0, TopK + 1 slots and all experts, with and without Shapes, on 1
// and 2 read workers; bytes read are the stored (record) bytes.
func TestCodedModelLayersBitIdentical(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, raw, layers, weights, memSrc := mappedModel(t, dir)
			ck, err := safetensors.Open(repack(t, dir))
			require.NoError(t, err)
			defer ck.Close()
			shapes := modelShapes(c)
			cfg := cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK, Shapes: shapes}
			rawStore, err := cache.New(raw, cfg)
			require.NoError(t, err)
			probe, err := cache.New(ck, cfg)
			require.NoError(t, err)
			assert.Equal(t, rawStore.SlotBytes(), probe.SlotBytes(), "slots are sized as for the raw checkpoint")
			assert.Equal(t, rawStore.ExpertBytes(), probe.ExpertBytes(), "ExpertBytes is the decoded size")
			slot := probe.SlotBytes()
			require.NoError(t, probe.Close())
			require.NoError(t, rawStore.Close())

			var stored int64 // every coded expert tensor's stored bytes
			for _, tn := range ck.Tensors() {
				if strings.Contains(tn.Name, ".block_sparse_moe.experts.") {
					stored += tn.Size
				}
			}
			all := len(layers) * c.NumExperts
			r := rand.New(rand.NewPCG(9, 10))
			inputs := stepInputs(r, c.Hidden, 3, 16) // the prefill chunk waves through the small caches
			want := mappedOutputs(t, c, layers, 1, weights, memSrc, inputs)
			for _, workers := range []int{1, 2} {
				for _, slots := range []int{0, c.TopK + 1, all} {
					for _, v := range []struct{ shapes, prefetch bool }{{true, false}, {false, false}, {true, true}} {
						name := fmt.Sprintf("workers=%d/slots=%d/shapes=%v/prefetch=%v", workers, slots, v.shapes, v.prefetch)
						cc := cfg
						cc.Budget = int64(slots) * slot
						if !v.shapes {
							cc.Shapes = nil
						}
						opts := []cache.Option{cache.WithReadWorkers(workers)}
						if v.prefetch {
							opts = append(opts, cache.WithSpeculation())
						}
						s, err := cache.New(ck, cc, opts...)
						require.NoError(t, err, name)
						var prefetch func(li int)
						if v.prefetch { // background reads decode too
							prefetch = func(li int) {
								if li+1 < len(layers) {
									s.Prefetch(layers[li+1], r.Perm(c.NumExperts)[:c.TopK])
								}
							}
						}
						requireSameSteps(t, name+", against the raw experts", c, layers, workers, weights, s, inputs, want, prefetch)
						st := s.Stats()
						require.Positive(t, st.Run.Misses, name)
						require.Positive(t, st.Run.DecodeSeconds, name)
						require.Zero(t, st.Leased, name)
						if slots == all && !v.prefetch {
							// Read each expert once more through Get: all are
							// resident now, so the run read every expert once.
							for _, l := range layers {
								for e := range c.NumExperts {
									_, release, err := s.Experts(l, []int{e}, nil)
									require.NoError(t, err)
									release()
								}
							}
							st = s.Stats()
							require.Equal(t, int64(all), st.Run.Misses, name)
							require.Equal(t, stored, st.Run.BytesRead, "%s: bytes read are the stored bytes", name)
						}
						require.NoError(t, s.Close())
					}
				}
			}
		})
	}
}

// A corrupt record fails the load with *ExpertLoadError (rans.ErrCorrupt)
// and leaves the slot EMPTY: the next request reads and fails again, and the
// other experts still load.
func TestCodedCorruptRecord(t *testing.T) {
	dir := testkit.Models(t)[0]
	c, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	bad := testkit.CopyDir(t, repack(t, dir))
	ck, err := safetensors.Open(bad)
	require.NoError(t, err)
	defer ck.Close()
	target := codedRecord(t, ck)
	flipFrequencyBit(t, target)
	layer, expert, _, ok := layout.ParseExpert(target.Name)
	require.True(t, ok, target.Name)
	probe, err := cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, Shapes: modelShapes(c)})
	require.NoError(t, err, "the header is intact: New accepts the record")
	slot := probe.SlotBytes()
	require.NoError(t, probe.Close())
	for _, slots := range []int{0, c.TopK + 1} {
		t.Run(fmt.Sprint("slots=", slots), func(t *testing.T) {
			s, err := cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK,
				Budget: int64(slots) * slot, Shapes: modelShapes(c)})
			require.NoError(t, err)
			defer s.Close()
			for try := range 2 {
				_, _, err = s.Experts(layer, []int{expert}, nil)
				var le *cache.ExpertLoadError
				require.ErrorAs(t, err, &le, "try %d", try)
				assert.Equal(t, layer, le.Layer)
				assert.Equal(t, expert, le.Expert)
				assert.ErrorIs(t, err, rans.ErrCorrupt)
				assert.Contains(t, err.Error(), "weight_packed")
				st := s.Stats()
				assert.Zero(t, st.Resident, "a failed decode publishes nothing")
				assert.Zero(t, st.Leased)
				assert.Equal(t, int64(try+1), st.Run.Failures)
			}
			other := (expert + 1) % c.NumExperts
			_, release, err := s.Experts(layer, []int{other}, nil)
			require.NoError(t, err)
			release()
		})
	}
}

// A record without its stamp is never taken for coded weights nor read as
// raw ones: New refuses it, naming the tensor.
func TestCodedUnstampedRefused(t *testing.T) {
	dir := testkit.Models(t)[0]
	c, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	bad := testkit.CopyDir(t, repack(t, dir))
	require.Positive(t, testkit.HideHeaderKey(t, bad, quant.StampKey), "no stamped shard in %s", bad)
	ck, err := safetensors.Open(bad)
	require.NoError(t, err)
	defer ck.Close()
	for _, shapes := range []*cache.Shapes{modelShapes(c), nil} {
		_, err = cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, Shapes: shapes})
		require.ErrorIs(t, err, cache.ErrExpertTensor)
		require.ErrorIs(t, err, rans.ErrUnstamped)
		assert.Regexp(t, `experts\.[0-9]+\.w[123]\.weight_packed`, err.Error())
	}
}

// A record stamped with a weight format other than MXFP4 or decoding to the
// wrong size is refused at New.
func TestCodedWrongRecordRefused(t *testing.T) {
	dir := testkit.Models(t)[0]
	c, err := config.Load(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	ck, err := safetensors.Open(repack(t, dir))
	require.NoError(t, err)
	defer ck.Close()
	sh := modelShapes(c)
	wrong := *sh
	wrong.W1[1] += 32
	_, err = cache.New(ck, cache.Config{Layers: moeLayers(c), NumExperts: c.NumExperts, TopK: c.TopK, Shapes: &wrong})
	require.ErrorIs(t, err, cache.ErrExpertTensor)
	assert.Contains(t, err.Error(), "record decodes to")
	assert.False(t, errors.Is(err, rans.ErrUnstamped))
}
