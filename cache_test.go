package k3_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/quant/cfs1"
	"github.com/k3-project/k3/quant/rans"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
)

// cacheBudgets returns the budgets for a model: 0, TopK + 1 slots, half and all experts.
func cacheBudgets(t *testing.T, dir string) map[string]int64 {
	p, err := k3.PlanFor(dir, k3.WithCacheBudget(0))
	require.NoError(t, err)
	c := p.Cache
	m := openModel(t, dir)
	cfg := m.Config()
	all := int64(cfg.NumExperts*(cfg.NumLayers-cfg.FirstDense)) * c.SlotBytes
	return map[string]int64{"zero": 0, "topk+1": int64(cfg.TopK+1) * c.SlotBytes, "half": all / 2, "all": all}
}

// TestCacheBitIdentical is the expert store's acceptance matrix on every model: cache budgets 0,
// TopK + 1 slots, half and all experts; LRU and S3-FIFO; router lookahead on and off; 1 and 2
// threads (sweepThreads); and combined with a streamed trunk.
func TestCacheBitIdentical(t *testing.T) {
	threadCounts := sweepThreads()
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		want := runModel(t, openModel(t, dir), ref)
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
		for name, b := range cacheBudgets(t, dir) {
			for _, policy := range []string{"lru", "s3fifo"} {
				for _, pf := range []int{0, 3} {
					for _, threads := range threadCounts {
						for _, streamed := range []bool{false, true} {
							if streamed && (threads != threadCounts[0] || pf == 0) {
								continue // the trunk matrix has its own test; keep the product small
							}
							t.Run(fmt.Sprintf("%s/%s/pf%d/t%d/streamed=%v", name, policy, pf, threads, streamed), func(t *testing.T) {
								opts := []k3.Option{k3.WithThreads(threads), k3.WithCacheBudget(b), k3.WithCachePolicy(policy), k3.WithExpertPrefetch(pf)}
								if streamed {
									opts = append(opts, k3.WithTrunkBudget(fl.Floor+fl.MinSlot), k3.WithTrunkSlot(smallSlot))
								}
								m := openModel(t, dir, opts...)
								got := runModel(t, m, ref)
								assert.Equal(t, want, got)
								st := m.Stats().Cache
								require.NotNil(t, st)
								assert.Positive(t, st.Run.Requests)
								if b == 0 {
									assert.Zero(t, st.Run.TrueHits, "nothing is retained at budget 0")
								}
								if pf > 0 && !streamed {
									assert.Positive(t, st.Run.PrefetchRequests, "lookahead predicts")
									assert.LessOrEqual(t, st.Run.PrefetchUsed, st.Run.Hits)
								}
							})
						}
					}
				}
			}
		}
	})
}

func TestCacheBudgetTooSmall(t *testing.T) {
	dir := testkit.Models(t)[0]
	p, err := k3.PlanFor(dir, k3.WithCacheBudget(0))
	require.NoError(t, err)
	_, err = k3.Open(dir, k3.WithCacheBudget(p.Cache.SlotBytes-1))
	require.ErrorIs(t, err, cache.ErrBudgetTooSmall)
	assert.Contains(t, err.Error(), "the minimum is")
	_, err = k3.PlanFor(dir, k3.WithCacheBudget(p.Cache.SlotBytes-1))
	require.ErrorIs(t, err, cache.ErrBudgetTooSmall)
}

// failReader fails reads that cover one offset with EIO once armed.
type failReader struct {
	storage.File
	at    int64
	armed *atomic.Bool
	mu    sync.Mutex
	n     int
}

func (f *failReader) ReadAt(p []byte, off int64) (int, error) {
	if f.armed.Load() && (f.at < 0 || off <= f.at && f.at < off+int64(len(p))) {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		return 0, syscall.EIO
	}
	return f.File.ReadAt(p, off)
}

// TestCacheReadFault: a failed expert read surfaces as *ExpertLoadError naming layer and expert;
// no token is emitted and the session is broken.
func TestCacheReadFault(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		target := firstTensor(t, dir, func(name string) bool { return strings.Contains(name, ".experts.") })
		var fr []*failReader
		var armed atomic.Bool // the shard is also read at Open (headers, checks, bound tensors)
		open := func(path string) (storage.File, error) {
			f, err := storage.Open(path)
			if err != nil || path != target.File {
				return f, err
			}
			r := &failReader{File: f, at: -1, armed: &armed} // every expert read of this shard fails
			fr = append(fr, r)
			return r, nil
		}
		m := openModel(t, dir, k3.WithCacheBudget(0), k3.WithOpener(open))
		armed.Store(true)
		// Teacher forcing over the whole reference touches most experts of every layer.
		_, err := m.Forward(context.Background(), ref.FullIDs)
		require.Error(t, err)
		var le *cache.ExpertLoadError
		require.ErrorAs(t, err, &le)
		assert.GreaterOrEqual(t, le.Layer, 1)
		assert.ErrorIs(t, err, syscall.EIO)
		s := m.NewSession()
		for id, err := range m.Generate(context.Background(), ref.FullIDs, k3.GenerateOptions{MaxTokens: 2}) {
			require.Equal(t, -1, id, "no token from a failed expert read")
			require.Error(t, err)
		}
		_ = s
	})
}

// codedExpert is the routed-expert selection of k3 compress-experts.
var codedExpert = regexp.MustCompile(`\.block_sparse_moe\.experts\.[0-9]+\.w[123]\.weight_packed$`)

// repackExperts writes dir with its routed-expert weights entropy-coded (quant/rans).
func repackExperts(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+"-cfs1")
	_, err := rans.Repack(dir, out, rans.RepackOptions{Workers: 2, Select: func(name string) (string, bool) {
		if !codedExpert.MatchString(name) {
			return "", false
		}
		return strings.TrimSuffix(name, "_packed") + "_scale", true
	}})
	require.NoError(t, err)
	return out
}

// TestCodedExpertsBitIdentical: a checkpoint whose routed experts are entropy-coded gives
// tokens and logits bit-identical to the raw checkpoint through the expert cache at budgets 0,
// TopK + 1 slots and all experts, on 1 and 2 threads, with the raw run's slots, hits and
// evictions, reading the stored (coded) bytes. Without options the stamps select the expert
// cache at budget 0 (the coded experts cannot be mapped), which PlanFor shows, and the run is
// bit-identical too; the raw checkpoint stays mapped.
func TestCodedExpertsBitIdentical(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		want := runModel(t, openModel(t, dir), ref)
		coded := repackExperts(t, dir)
		p, err := k3.PlanFor(coded)
		require.NoError(t, err)
		require.NotNil(t, p.Cache, "the stamps select the expert cache")
		assert.Zero(t, p.Cache.Budget, "no memory is guessed")
		assert.Contains(t, p.String(), "expert cache   none: each expert read into")
		raw, err := k3.PlanFor(dir)
		require.NoError(t, err)
		assert.Nil(t, raw.Cache, "raw experts stay mapped")
		assert.NotContains(t, raw.String(), "expert cache")
		dm := openModel(t, coded)
		require.NotNil(t, dm.Plan().Cache)
		assert.Equal(t, want, runModel(t, dm, ref), "no options")
		st := dm.Stats().Cache
		require.NotNil(t, st)
		assert.Positive(t, st.Run.DecodeSeconds, "coded experts were decoded")
		budgets := cacheBudgets(t, dir)
		for _, name := range []string{"zero", "topk+1", "all"} {
			for _, threads := range sweepThreads() {
				b := budgets[name]
				opts := []k3.Option{k3.WithThreads(threads), k3.WithCacheBudget(b)}
				m := openModel(t, coded, opts...)
				got := runModel(t, m, ref)
				assert.Equal(t, want, got, "%s threads=%d", name, threads)
				st := m.Stats().Cache
				require.NotNil(t, st)
				assert.Positive(t, st.Run.DecodeSeconds, "%s: coded experts were decoded", name)
				if threads > 1 {
					continue
				}
				// The same run over the raw shards requests the same experts; only the bytes
				// read differ: the stored records instead of the raw tensors.
				rm := openModel(t, dir, opts...)
				require.Equal(t, want, runModel(t, rm, ref))
				rs := rm.Stats().Cache
				assert.Equal(t, rs.Run.Requests, st.Run.Requests, name)
				assert.Equal(t, rs.Run.Misses, st.Run.Misses, name)
				assert.Equal(t, rs.Run.Hits, st.Run.Hits, name)
				assert.Equal(t, rs.Run.Evictions, st.Run.Evictions, name)
				assert.Equal(t, rs.Slots, st.Slots, name)
				assert.NotEqual(t, rs.Run.BytesRead, st.Run.BytesRead, "%s: bytes read are stored bytes", name)
				assert.Zero(t, rs.Run.DecodeSeconds)
			}
		}
	})
}

// TestCodedExpertsCorrupt: a damaged record fails the forward pass with *ExpertLoadError
// (rans.ErrCorrupt); no token is emitted.
func TestCodedExpertsCorrupt(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	bad := testkit.CopyDir(t, repackExperts(t, dir))
	ck, err := safetensors.Open(bad)
	require.NoError(t, err)
	n := 0
	for _, tn := range ck.Tensors() {
		if !codedExpert.MatchString(tn.Name) {
			continue
		}
		b, err := ck.Bytes(tn)
		require.NoError(t, err)
		if len(tn.Shape) != 1 || b[4] != cfs1.ModeNibble {
			continue
		}
		// Flip one bit of the first frequency: the table no longer sums to 4096, which the
		// decoder always refuses, while the header the store checks at Open stays valid.
		testkit.FlipBits(t, tn.File, tn.Offset+9, 1)
		n++
	}
	ck.Close()
	require.Positive(t, n)
	for _, budget := range []string{"zero", "topk+1"} {
		m := openModel(t, bad, k3.WithCacheBudget(cacheBudgets(t, dir)[budget]))
		_, err = m.Forward(context.Background(), ref.FullIDs)
		var le *cache.ExpertLoadError
		require.ErrorAs(t, err, &le, budget)
		assert.GreaterOrEqual(t, le.Layer, 1)
		assert.ErrorIs(t, err, rans.ErrCorrupt)
		for id, err := range m.Generate(context.Background(), ref.PromptIDs, k3.GenerateOptions{MaxTokens: 2}) {
			require.Equal(t, -1, id, "no token from a corrupt expert")
			require.ErrorAs(t, err, &le)
		}
	}
}

// TestCodedExpertsUnstamped: records whose colibri.fmt stamp is gone are refused at Open,
// never guessed to be coded.
func TestCodedExpertsUnstamped(t *testing.T) {
	dir := testkit.Models(t)[0]
	bad := testkit.CopyDir(t, repackExperts(t, dir))
	require.Positive(t, testkit.HideHeaderKey(t, bad, quant.StampKey), "no stamped shard in %s", bad)
	_, err := k3.Open(bad, k3.WithCacheBudget(0))
	require.ErrorIs(t, err, cache.ErrExpertTensor)
	require.ErrorIs(t, err, rans.ErrUnstamped)
	assert.Contains(t, err.Error(), "weight_packed")
}

// TestCacheBudgetScratch: a cache budget below TopK + 1 experts keeps no cache and bounds the
// read scratch instead: k slots (the budget rounded down), the store's MaxBatch k, a layer's
// picks read in ⌈TopK / k⌉ waves that the plan prints, and logits and greedy ids equal to the
// mapped model's, for every k below TopK on every fixture model.
func TestCacheBudgetScratch(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		want := runModel(t, openModel(t, dir), ref)
		p, err := k3.PlanFor(dir, k3.WithCacheBudget(0))
		require.NoError(t, err)
		slot, topK := p.Cache.SlotBytes, p.Cache.TopK
		require.Greater(t, topK, 1, "a fixture with one pick has no smaller scratch to test")
		for k := 1; k < topK; k++ {
			t.Run(fmt.Sprintf("slots%d", k), func(t *testing.T) {
				m := openModel(t, dir, k3.WithCacheBudget(int64(k)*slot+slot/2))
				c := m.Plan().Cache
				waves := (topK + k - 1) / k
				assert.Equal(t, [4]int{k, waves, 0, topK}, [4]int{c.ScratchSlots, c.Waves, c.Slots, c.TopK})
				assert.Equal(t, int64(k)*slot, c.ScratchBytes)
				assert.Equal(t, k, m.Stats().Cache.MaxBatch, "the store reads at most k experts at a time")
				if waves > 1 {
					assert.Contains(t, m.Plan().String(), fmt.Sprintf("read in %d waves per MoE layer", waves))
				}
				assert.Equal(t, want, runModel(t, m, ref))
			})
		}
	})
}
