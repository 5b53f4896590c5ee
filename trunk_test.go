package k3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/preset"
	"github.com/k3-project/k3/quant/lossless12"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
	"github.com/k3-project/k3/trunk"
)

// run is what a configuration produced on a model: teacher-forced logits and an incremental
// greedy continuation with the logits each pick came from.
type run struct {
	tf     uint64
	ids    []int
	greedy uint64
}

func runModel(t *testing.T, m *k3.Model, ref *testkit.Reference) run {
	t.Helper()
	logits, err := m.Forward(context.Background(), ref.FullIDs)
	require.NoError(t, err)
	ids, steps := greedy(t, m, ref.PromptIDs, len(ref.FullIDs)-len(ref.PromptIDs), false)
	return run{tf: testkit.Digest(logits...), ids: ids, greedy: testkit.Digest(steps...)}
}

// floorPlan returns the mapped-mode baseline plan's trunk floor for dir (with a tiny slot cap so
// that even the fixture models' tensors stream in several row ranges).
func floorOf(t *testing.T, dir string, opts ...k3.Option) *trunk.Plan {
	t.Helper()
	p, err := k3.PlanFor(dir, append(opts, k3.WithTrunkBudget(1<<40))...)
	require.NoError(t, err)
	require.NotNil(t, p.Trunk)
	return p.Trunk
}

const smallSlot = 16 << 10 // forces row-range pieces on the fixture models

// TestTrunkBudgetsBitIdentical is the trunk issue's acceptance matrix: on every model, tokens
// and logits are bit-identical to the fully mapped run for every named configuration, packed
// and unpacked, on 1 and 2 threads.
func TestTrunkBudgetsBitIdentical(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		want := runModel(t, openModel(t, dir), ref)
		packed := t.TempDir()
		require.NoError(t, checkpoint.PackTrunk(dir, packed, nil))
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
		all := fl.Total + fl.EmbedBytes // everything pinned (Total of a huge budget)
		cases := []struct {
			name  string
			opts  []k3.Option
			check func(*testing.T, *trunk.Plan)
		}{
			{"floor", []k3.Option{k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot)}, func(t *testing.T, p *trunk.Plan) {
				assert.Equal(t, 1, p.Slots, "one slot at the floor")
				assert.Empty(t, p.Pinned)
				assert.False(t, p.HeadPinned || p.EmbedPinned, "head and embedding stream at the floor")
				assert.False(t, p.ReadAhead)
			}},
			{"two-slots", []k3.Option{k3.WithTrunkBudget(fl.Floor + fl.MinSlot), k3.WithTrunkSlot(smallSlot)}, func(t *testing.T, p *trunk.Plan) {
				assert.Equal(t, 2, p.Slots)
				assert.True(t, p.ReadAhead)
			}},
			{"eight-slots", []k3.Option{k3.WithTrunkBudget(fl.Floor + 7*fl.MinSlot), k3.WithTrunkSlot(smallSlot), k3.WithTrunkRing(8)}, func(t *testing.T, p *trunk.Plan) {
				assert.Equal(t, 8, p.Slots)
			}},
			{"mixed", []k3.Option{k3.WithTrunkBudget(all / 2)}, func(t *testing.T, p *trunk.Plan) {
				assert.NotEmpty(t, p.Pinned)
				assert.Less(t, len(p.Pinned), p.Layers)
				assert.Positive(t, p.Slots)
			}},
			{"all-pinned", []k3.Option{k3.WithTrunkBudget(1 << 40)}, func(t *testing.T, p *trunk.Plan) {
				assert.Len(t, p.Pinned, p.Layers)
				assert.True(t, p.HeadPinned && p.EmbedPinned)
				assert.Zero(t, p.Slots, "no ring when everything is pinned")
			}},
		}
		for _, c := range cases {
			for _, layout := range []string{"shards", "packed"} {
				for _, threads := range sweepThreads() {
					t.Run(fmt.Sprintf("%s/%s/t%d", c.name, layout, threads), func(t *testing.T) {
						opts := append([]k3.Option{k3.WithThreads(threads)}, c.opts...)
						if layout == "packed" {
							opts = append(opts, k3.WithPackedTrunk(packed))
						}
						m := openModel(t, dir, opts...)
						c.check(t, m.Plan().Trunk)
						got := runModel(t, m, ref)
						assert.Equal(t, want, got, "tokens and logits must equal the mapped run's")
						st := m.Stats().Trunk
						require.NotNil(t, st)
						assert.Zero(t, st.OutOfOrder, "the walk order must follow the layer math")
						if layout == "packed" {
							assert.Equal(t, m.Config().NumLayers, st.Verified, "every packed layer verified on first load")
						}
					})
				}
			}
		}
	})
}

// TestTrunkBudgetSweep sweeps budgets from the floor upward until everything is pinned.
func TestTrunkBudgetSweep(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		base := openModel(t, dir)
		logits, err := base.Forward(context.Background(), ref.FullIDs)
		require.NoError(t, err)
		want := testkit.Digest(logits...)
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
		rungs := 0
		for b := fl.Floor; ; b = b * 3 / 2 {
			m := openModel(t, dir, k3.WithTrunkBudget(b), k3.WithTrunkSlot(smallSlot))
			p := m.Plan().Trunk
			require.LessOrEqual(t, p.Total, b, "the plan must fit its budget")
			got, err := m.Forward(context.Background(), ref.FullIDs)
			require.NoError(t, err, "budget %d", b)
			require.Equal(t, want, testkit.Digest(got...), "budget %d: %s", b, p)
			rungs++
			m.Close()
			if p.Slots == 0 {
				break
			}
		}
		t.Logf("%d budgets from %d bytes up to all pinned: all bit-identical", rungs, fl.Floor)
		assert.GreaterOrEqual(t, rungs, 6)
	})
}

func TestTrunkBudgetBelowFloor(t *testing.T) {
	dir := testkit.Models(t)[0]
	fl := floorOf(t, dir)
	_, err := k3.Open(dir, k3.WithTrunkBudget(fl.Floor-1))
	require.ErrorIs(t, err, trunk.ErrBudget)
	assert.Contains(t, err.Error(), fmt.Sprintf("minimum for this model is %d bytes", fl.Floor))
	_, err = k3.PlanFor(dir, k3.WithTrunkBudget(fl.Floor-1))
	require.ErrorIs(t, err, trunk.ErrBudget)
}

// TestPerfFloorBitIdentical runs the synthetic perf checkpoint (random weights everywhere, so a
// wrong byte anywhere would show) at the memory floor — trunk at its floor budget with one ring
// slot, embedding rows and lm_head streamed, experts read through the floor preset's scratch of
// preset.FloorScratchSlots experts, in waves — and compares teacher-forced logits and an
// incremental greedy continuation bit for bit with the fully mapped run. It needs K3_PERF_DIR
// (the perf checkpoint, about 1.6 GB, synthesized there on first use) and takes a minute or two.
func TestPerfFloorBitIdentical(t *testing.T) {
	dir := perfDir(t)
	ref := &testkit.Reference{PromptIDs: []int{11, 2048, 7, 31000, 5}, FullIDs: []int{11, 2048, 7, 31000, 5, 0, 0, 0}}
	mapped := openModel(t, dir)
	want := runModel(t, mapped, ref)
	mapped.Close()
	p, err := k3.PlanFor(dir, k3.WithTrunkBudget(1<<50))
	require.NoError(t, err)
	tb, cb, err := preset.Budgets(preset.Floor, dir) // the floor preset's smaller expert scratch
	require.NoError(t, err)
	require.Equal(t, p.Trunk.Floor, tb)
	m := openModel(t, dir, k3.WithTrunkBudget(tb), k3.WithCacheBudget(cb))
	fp, c := m.Plan().Trunk, m.Plan().Cache
	require.Equal(t, [2]int{preset.FloorScratchSlots, 0}, [2]int{c.ScratchSlots, c.Slots}, "experts read %d at a time", preset.FloorScratchSlots)
	require.Equal(t, 1, fp.Slots)
	require.False(t, fp.HeadPinned || fp.EmbedPinned || len(fp.Pinned) > 0)
	got := runModel(t, m, ref)
	assert.Equal(t, want, got, "floor logits and tokens must equal the mapped run's")
	st, cs := m.Stats().Trunk, m.Stats().Cache
	t.Logf("floor %d B: trunk %d B + head %d B streamed, %d embedding B; experts %d B read; ids %v",
		p.Trunk.Floor, st.BytesRead, st.HeadBytes, st.EmbedBytes, cs.Run.BytesRead, got.ids)
}

// faultFile fails or shortens the reads that cover one offset of one file once armed.
type faultFile struct {
	storage.File
	at    int64
	short bool
	armed *atomic.Bool
	hits  *atomic.Int64
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if f.armed.Load() && off <= f.at && f.at < off+int64(len(p)) {
		f.hits.Add(1)
		if f.short {
			n, err := f.File.ReadAt(p[:len(p)/2], off)
			if err == nil {
				err = io.EOF
			}
			return n, err
		}
		return 0, &os.PathError{Op: "read", Path: "fault", Err: syscall.EIO}
	}
	return f.File.ReadAt(p, off)
}

// TestTrunkReadFaults injects EIO and short reads midway through a streamed layer: the forward
// fails with a named error, nothing is emitted, and the session reports itself broken.
func TestTrunkReadFaults(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		ref := testkit.LoadReference(t, dir)
		ck, err := safetensors.Open(dir)
		require.NoError(t, err)
		victim, ok := ck.Tensor("language_model.model.layers.5.self_attn.o_proj.weight")
		if !ok {
			victim, ok = ck.Tensor("language_model.model.layers.5.self_attn.q_proj.weight")
		}
		require.True(t, ok)
		ck.Close()
		for _, short := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/short=%v", filepath.Base(dir), short), func(t *testing.T) {
				// The victim's shard is also read at Open (headers, integrity checks), which
				// must succeed: the fault is armed once the model is open.
				var armed atomic.Bool
				var hits atomic.Int64
				open := func(path string) (storage.File, error) {
					f, err := storage.Open(path)
					if err != nil || path != victim.File {
						return f, err
					}
					return &faultFile{File: f, at: victim.Offset + victim.Size/2, short: short, armed: &armed, hits: &hits}, nil
				}
				fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
				m := openModel(t, dir, k3.WithTrunkBudget(fl.Floor+fl.MinSlot), k3.WithTrunkSlot(smallSlot), k3.WithOpener(open))
				armed.Store(true)
				s := m.NewSession()
				err := s.Prefill(context.Background(), ref.PromptIDs)
				require.Error(t, err)
				var re *trunk.ReadError
				require.ErrorAs(t, err, &re)
				var fe *k3.ForwardError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, 5, fe.Layer)
				if short {
					assert.ErrorIs(t, err, safetensors.ErrShortRead)
				} else {
					assert.ErrorIs(t, err, syscall.EIO)
				}
				assert.Nil(t, s.Logits(), "no logits from a failed pass")
				_, err = s.Next()
				assert.ErrorIs(t, err, k3.ErrBroken)
				// Generate emits nothing from the bad bytes either.
				for id, err := range m.Generate(context.Background(), ref.PromptIDs, k3.GenerateOptions{MaxTokens: 3}) {
					require.Equal(t, -1, id)
					require.ErrorAs(t, err, &re)
				}
				assert.Positive(t, hits.Load())
			})
		}
	}
}

// readerOnly hides the *os.File behind a storage.File, so nothing can be mapped or read with
// O_DIRECT: every byte comes through ReadAt.
type readerOnly struct{ storage.File }

// TestOneOpener: WithOpener opens every weight file (the shards, for the checkpoint and the
// expert cache, and trunk.bin), and a model whose files are plain ReaderAts gives the mapped
// run's tokens and logits bit for bit.
func TestOneOpener(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	want := runModel(t, openModel(t, dir), ref)
	packed := t.TempDir()
	require.NoError(t, checkpoint.PackTrunk(dir, packed, nil))
	var mu sync.Mutex
	opened := map[string]int{}
	open := func(path string) (storage.File, error) {
		mu.Lock()
		opened[filepath.Base(path)]++
		mu.Unlock()
		f, err := storage.Open(path)
		if err != nil {
			return nil, err
		}
		return readerOnly{f}, nil
	}
	fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
	m := openModel(t, dir, k3.WithPackedTrunk(packed), k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot),
		k3.WithCacheBudget(0), k3.WithOpener(open))
	assert.Equal(t, want, runModel(t, m, ref), "tokens and logits must equal the mapped run's")
	ck, err := safetensors.Open(dir)
	require.NoError(t, err)
	shards := ck.Shards()
	ck.Close()
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, opened[trunk.BinName], 1, "trunk.bin")
	total := 0
	for _, s := range shards {
		assert.GreaterOrEqual(t, opened[filepath.Base(s)], 1, s)
		total += opened[filepath.Base(s)]
	}
	assert.Greater(t, total, len(shards), "the expert cache opens shards too")
}

// TestPackedTrunkFaults: a truncated trunk.bin and a changed byte are refused by name.
func TestPackedTrunkFaults(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	t.Run("truncated", func(t *testing.T) {
		p := t.TempDir()
		require.NoError(t, checkpoint.PackTrunk(dir, p, nil))
		bin := filepath.Join(p, trunk.BinName)
		st, err := os.Stat(bin)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(bin, st.Size()-4096))
		_, err = k3.Open(dir, k3.WithPackedTrunk(p), k3.WithTrunkBudget(1<<30))
		require.ErrorIs(t, err, trunk.ErrLayout)
		assert.Contains(t, err.Error(), "ends past trunk.bin")
	})
	t.Run("interrupted", func(t *testing.T) {
		p := t.TempDir()
		require.NoError(t, checkpoint.PackTrunk(dir, p, nil))
		require.NoError(t, os.Remove(filepath.Join(p, trunk.LayoutName)))
		_, err := k3.Open(dir, k3.WithPackedTrunk(p))
		require.ErrorIs(t, err, trunk.ErrIncomplete)
	})
	for _, pinned := range []bool{true, false} {
		t.Run(fmt.Sprintf("checksum/pinned=%v", pinned), func(t *testing.T) {
			p := t.TempDir()
			require.NoError(t, checkpoint.PackTrunk(dir, p, nil))
			l, err := trunk.ReadLayout(p, 0+mustLayers(t, dir), trunk.Expect{})
			require.NoError(t, err)
			r := l.Layers[3]
			testkit.FlipBits(t, filepath.Join(p, trunk.BinName), r.FileOff+r.Unpadded/2, 0x10)
			budget := int64(1 << 40)
			if !pinned {
				budget = floorOf(t, dir, k3.WithTrunkSlot(smallSlot)).Floor * 2
			}
			m, err := k3.Open(dir, k3.WithPackedTrunk(p), k3.WithTrunkBudget(budget), k3.WithTrunkSlot(smallSlot))
			if pinned {
				require.ErrorIs(t, err, trunk.ErrChecksum)
				assert.Contains(t, err.Error(), "layer 3")
				return
			}
			require.NoError(t, err)
			defer m.Close()
			_, err = m.Forward(context.Background(), ref.FullIDs)
			require.ErrorIs(t, err, trunk.ErrChecksum)
			var fe *k3.ForwardError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, 3, fe.Layer)
			// Skipping verification is explicit, and then the changed bytes are used.
			m2 := openModel(t, dir, k3.WithPackedTrunk(p), k3.WithTrunkBudget(budget), k3.WithTrunkSlot(smallSlot), k3.WithoutTrunkVerify())
			_, err = m2.Forward(context.Background(), ref.FullIDs)
			require.NoError(t, err)
		})
	}
}

func mustLayers(t *testing.T, dir string) int {
	m := openModel(t, dir)
	return m.Config().NumLayers
}

// TestTrunkTracer: WithTracer sees every streamed read and every layer.
func TestTrunkTracer(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	tr := &countTracer{}
	fl := floorOf(t, dir)
	m := openModel(t, dir, k3.WithTrunkBudget(fl.Floor*2), k3.WithTracer(tr))
	_, err := m.Forward(context.Background(), ref.FullIDs)
	require.NoError(t, err)
	// Read-ahead may still be filling a slot when Forward returns, and the tracer hears of a
	// read before the statistics count its piece; Close waits for every fill.
	require.NoError(t, m.Close())
	st := m.Stats().Trunk
	tr.mu.Lock()
	defer tr.mu.Unlock()
	assert.Equal(t, m.Config().NumLayers, tr.layers)
	assert.Equal(t, st.BytesRead+st.HeadBytes+st.EmbedBytes+st.PinnedBytes, tr.bytes)
}

type countTracer struct {
	mu     sync.Mutex
	layers int
	bytes  int64
}

func (c *countTracer) ExpertRequest(layer, expert int) {}

func (c *countTracer) TrunkRead(layer int, off, n int64, d time.Duration) {
	c.mu.Lock()
	c.bytes += n
	c.mu.Unlock()
}

func (c *countTracer) LayerDone(layer int, d time.Duration) {
	c.mu.Lock()
	c.layers++
	c.mu.Unlock()
}

// walkTracer records, in order, which tensor each streamed read of a layer's weights was for,
// and where each layer ended.
type walkTracer struct {
	mu     sync.Mutex
	byOff  []map[int64]string // per layer: checkpoint offset of each streamed matrix → its name
	events []walkEvent
}

type walkEvent struct {
	layer int
	name  string // "" marks the end of the layer
}

func (w *walkTracer) ExpertRequest(layer, expert int) {}

func (w *walkTracer) TrunkRead(layer int, off, n int64, d time.Duration) {
	if layer < 0 {
		return // embedding rows and the head
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// A row range of a tensor starts inside it: find the tensor starting at or before off.
	best, bestOff := "", int64(-1)
	for o, name := range w.byOff[layer] {
		if o <= off && o > bestOff {
			best, bestOff = name, o
		}
	}
	w.events = append(w.events, walkEvent{layer, best})
}

func (w *walkTracer) LayerDone(layer int, d time.Duration) {
	w.mu.Lock()
	w.events = append(w.events, walkEvent{layer: layer})
	w.mu.Unlock()
}

// TestStreamWalkOrder holds the layer math to the order package layout declares: with one ring
// slot at the trunk floor nothing is read ahead and every matrix streams, so the reads of a
// forward pass happen in exactly the order the math asks for the matrices. For every layer of
// every pass, the order in which its matrices were first read must be layout.Layer's order of
// its matrices, which is the order the binder lists them to the trunk planner.
func TestStreamWalkOrder(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		cfg, err := config.Load(filepath.Join(dir, "config.json"))
		require.NoError(t, err)
		ck, err := safetensors.Open(dir)
		require.NoError(t, err)
		defer ck.Close()
		tr := &walkTracer{byOff: make([]map[int64]string, cfg.NumLayers)}
		want := make([][]string, cfg.NumLayers)
		for l := range cfg.NumLayers {
			tr.byOff[l] = map[int64]string{}
			for _, s := range layout.Layer(cfg, l) {
				if s.Kind != layout.Matrix {
					continue
				}
				ts, ok := ck.Tensor(s.Name)
				require.True(t, ok, s.Name)
				tr.byOff[l][ts.Offset] = s.Name
				want[l] = append(want[l], s.Name)
			}
		}
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
		m := openModel(t, dir, k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot), k3.WithTrunkRing(1),
			k3.WithThreads(2), k3.WithTracer(tr))
		require.Equal(t, 1, m.Plan().Trunk.Slots)
		require.Empty(t, m.Plan().Trunk.Pinned)
		s := m.NewSession()
		require.NoError(t, s.Prefill(context.Background(), ref.PromptIDs))
		require.NoError(t, s.Step(context.Background(), ref.FullIDs[len(ref.PromptIDs)]))
		m.Close()

		var got []string
		passes := 0
		for _, e := range tr.events {
			if e.name != "" {
				if !slices.Contains(got, e.name) {
					got = append(got, e.name)
				}
				continue
			}
			require.Equal(t, want[e.layer], got, "layer %d: first reads of its matrices in pass %d", e.layer, passes)
			got = got[:0]
			if e.layer == cfg.NumLayers-1 {
				passes++
			}
		}
		assert.Equal(t, 2, passes)
	})
}

// packLossless12 packs dir's trunk in lossless12 and returns the directory and its layout.
func packLossless12(t *testing.T, dir string) (string, *trunk.Layout) {
	t.Helper()
	p := t.TempDir()
	require.NoError(t, checkpoint.PackTrunk(dir, p, nil, checkpoint.WithTrunkFormat("lossless12")))
	l, err := trunk.ReadLayout(p, mustLayers(t, dir), trunk.Expect{})
	require.NoError(t, err)
	return p, l
}

// TestLossless12PackedTrunk is issue 27's acceptance on the fixture models: a trunk packed in
// lossless12 is smaller than the bf16 pack, and its tokens and logits equal the mapped bf16
// run's bit for bit at the floor, in between and all pinned, on one and two threads, read from
// the pack (every layer, the embedding and the head verified against its checksum) or from the
// checkpoint's bf16 originals (nothing of the pack read).
func TestLossless12PackedTrunk(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		want := runModel(t, openModel(t, dir), ref)
		bf := t.TempDir()
		require.NoError(t, checkpoint.PackTrunk(dir, bf, nil))
		l12, l := packLossless12(t, dir)
		encoded, kept := 0, 0
		for _, r := range l.Layers {
			for _, rt := range r.Tensors {
				switch rt.Format {
				case trunk.FormatLossless12:
					encoded++
				case trunk.FormatBF16:
					kept++
				}
			}
		}
		assert.Positive(t, encoded, "matrices in lossless12")
		sb, err := os.Stat(filepath.Join(bf, trunk.BinName))
		require.NoError(t, err)
		sl, err := os.Stat(filepath.Join(l12, trunk.BinName))
		require.NoError(t, err)
		t.Logf("%d matrices in lossless12, %d kept in bf16; trunk.bin %d bytes against %d (%.4f×)",
			encoded, kept, sl.Size(), sb.Size(), float64(sl.Size())/float64(sb.Size()))
		assert.Less(t, sl.Size(), sb.Size())
		fb := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(bf))
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(l12, trunk.SourcePacked))
		assert.Less(t, fl.Total, fb.Total, "the planner counts the encoded bytes")
		all := fl.Total + fl.EmbedBytes
		cases := []struct {
			name string
			opts []k3.Option
		}{
			{"floor", []k3.Option{k3.WithTrunkSlot(smallSlot)}}, // the budget: the source's floor
			{"mixed", []k3.Option{k3.WithTrunkBudget(all / 2)}},
			{"all-pinned", nil}, // a packed trunk without a budget is pinned whole
		}
		for _, c := range cases {
			for _, threads := range sweepThreads() {
				for _, src := range []trunk.Source{trunk.SourcePacked, trunk.SourceShards} {
					t.Run(fmt.Sprintf("%s/t%d/%s", c.name, threads, src), func(t *testing.T) {
						opts := append([]k3.Option{k3.WithThreads(threads), k3.WithPackedTrunk(l12, src)}, c.opts...)
						if c.name == "floor" {
							opts = append(opts, k3.WithTrunkBudget(map[trunk.Source]int64{trunk.SourcePacked: fl.Floor, trunk.SourceShards: fb.Floor}[src]))
						}
						m := openModel(t, dir, opts...)
						assert.Equal(t, src, m.Plan().PackedSource)
						p := m.Plan().Trunk
						switch c.name {
						case "floor":
							assert.Empty(t, p.Pinned)
						case "mixed":
							assert.NotEmpty(t, p.Pinned)
							assert.Less(t, len(p.Pinned), p.Layers)
						default:
							assert.Len(t, p.Pinned, p.Layers)
						}
						assert.Equal(t, want, runModel(t, m, ref), "tokens and logits must equal the bf16 trunk's")
						st := m.Stats().Trunk
						require.NotNil(t, st)
						if src == trunk.SourcePacked {
							assert.Equal(t, m.Config().NumLayers+2, st.Verified, "every packed layer, the embedding and the head verified on first load")
						} else {
							assert.Zero(t, st.Verified, "the pack is not read")
						}
					})
				}
			}
		}
	})
}

// verifyPacked runs (*trunk.Packed).Verify on the packed trunk p of dir.
func verifyPacked(t *testing.T, dir, p string) error {
	t.Helper()
	pk, err := trunk.OpenPacked(p, mustLayers(t, dir), trunk.Expect{}, nil)
	require.NoError(t, err)
	defer pk.Close()
	var last, total int64
	err = pk.Verify(func(d, n int64) { last, total = d, n })
	assert.Equal(t, total, last, "progress reaches the total")
	return err
}

// firstLossless12 returns the first lossless12 tensor of layer 1 and its run.
func firstLossless12(t *testing.T, l *trunk.Layout) (trunk.LayerRun, trunk.RunTensor) {
	t.Helper()
	r := l.Layers[1]
	for _, rt := range r.Tensors {
		if rt.Format == trunk.FormatLossless12 {
			return r, rt
		}
	}
	t.Fatal("layer 1 has no lossless12 tensor")
	return r, trunk.RunTensor{}
}

// patchBin overwrites bytes of trunk.bin at off and, with reseal, rewrites the run's sha256 in
// trunk.json so that only the format's own checks stand between the bytes and the kernels.
func patchBin(t *testing.T, p string, r trunk.LayerRun, off int64, b []byte, reseal bool) {
	t.Helper()
	bin := filepath.Join(p, trunk.BinName)
	f, err := os.OpenFile(bin, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	run := make([]byte, r.Unpadded)
	_, err = f.ReadAt(run, r.FileOff)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	if !reseal {
		return
	}
	sum := sha256.Sum256(run)
	editLayout(t, p, hex.EncodeToString(r.SHA256), hex.EncodeToString(sum[:]))
}

func editLayout(t *testing.T, p, from, to string) {
	t.Helper()
	path := filepath.Join(p, trunk.LayoutName)
	js, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 1, bytes.Count(js, []byte(from)), "%s once in trunk.json", from)
	require.NoError(t, os.WriteFile(path, bytes.Replace(js, []byte(from), []byte(to), 1), 0o644))
}

// TestLossless12PackedTrunkFaults: a flipped bit in a lossless12 layer fails its checksum; a
// malformed block (its checksum made to match) is refused by name, never decoded; a header or
// a trunk.json format field that disagrees with the bytes refuses the open.
func TestLossless12PackedTrunkFaults(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	t.Run("flipped-bit", func(t *testing.T) {
		p, l := packLossless12(t, dir)
		r, rt := firstLossless12(t, l)
		require.NoError(t, verifyPacked(t, dir, p), "a sound pack verifies")
		testkit.FlipBits(t, filepath.Join(p, trunk.BinName), r.FileOff+rt.Off+rt.NBytes/2, 0x04)
		_, err := k3.Open(dir, k3.WithPackedTrunk(p, trunk.SourcePacked))
		require.ErrorIs(t, err, trunk.ErrChecksum)
		assert.Contains(t, err.Error(), "layer 1")
		err = verifyPacked(t, dir, p)
		require.ErrorIs(t, err, trunk.ErrChecksum)
		assert.Contains(t, err.Error(), "layer 1 ")
		le, ok := errors.AsType[*trunk.LayerError](err)
		require.True(t, ok, "Verify's problems are *trunk.LayerError")
		assert.Equal(t, 1, le.Layer)
	})
	for _, pinned := range []bool{true, false} {
		t.Run(fmt.Sprintf("malformed-block/pinned=%v", pinned), func(t *testing.T) {
			p, l := packLossless12(t, dir)
			r, rt := firstLossless12(t, l)
			// Row 0's first window base, above the largest a window may have (lossless12.MaxBase).
			patchBin(t, p, r, r.FileOff+rt.Off+lossless12.HeaderSize, []byte{lossless12.MaxBase + 1}, true)
			verr := verifyPacked(t, dir, p)
			require.ErrorIs(t, verr, lossless12.ErrMalformed)
			assert.NotErrorIs(t, verr, trunk.ErrChecksum)
			assert.Contains(t, verr.Error(), rt.Name)
			le, ok := errors.AsType[*trunk.LayerError](verr)
			require.True(t, ok, "Verify's problems are *trunk.LayerError")
			assert.Equal(t, r.Layer, le.Layer)
			opts := []k3.Option{k3.WithPackedTrunk(p, trunk.SourcePacked)}
			if !pinned {
				opts = append(opts, k3.WithTrunkBudget(floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(p, trunk.SourcePacked)).Floor),
					k3.WithTrunkSlot(smallSlot))
			}
			m, err := k3.Open(dir, opts...)
			if err == nil {
				defer m.Close()
				_, err = m.Forward(t.Context(), ref.FullIDs)
			}
			require.ErrorIs(t, err, lossless12.ErrMalformed)
			assert.Contains(t, err.Error(), rt.Name)
		})
	}
	t.Run("header-disagrees", func(t *testing.T) {
		p, l := packLossless12(t, dir)
		r, rt := firstLossless12(t, l)
		var cols [4]byte
		binary.LittleEndian.PutUint32(cols[:], uint32(rt.Shape[0]))
		var rows [4]byte
		binary.LittleEndian.PutUint32(rows[:], uint32(rt.Shape[1]))
		// Rows and cols swapped: a well-formed header of another shape.
		patchBin(t, p, r, r.FileOff+rt.Off+4, append(rows[:], cols[:]...), true)
		_, err := k3.Open(dir, k3.WithPackedTrunk(p))
		require.ErrorIs(t, err, trunk.ErrLayout)
		assert.Contains(t, err.Error(), rt.Name)
		assert.Contains(t, err.Error(), "header")
	})
	t.Run("bad-magic", func(t *testing.T) {
		p, l := packLossless12(t, dir)
		r, rt := firstLossless12(t, l)
		patchBin(t, p, r, r.FileOff+rt.Off, []byte("LL13"), true)
		_, err := k3.Open(dir, k3.WithPackedTrunk(p))
		require.ErrorIs(t, err, trunk.ErrLayout)
		require.ErrorIs(t, err, lossless12.ErrMalformed)
		assert.Contains(t, err.Error(), rt.Name)
	})
	t.Run("format-field", func(t *testing.T) {
		p, l := packLossless12(t, dir)
		_, rt := firstLossless12(t, l)
		esc := fmt.Sprintf(`"format":"lossless12","escapes":%d`, rt.Escapes)
		for _, c := range []struct{ to, msg string }{
			{`"format":"bf16"`, "format bf16 on a U8 tensor"},
			{`"format":"lossless13","escapes":0`, `"lossless13"`},
			{fmt.Sprintf(`"format":"lossless12","escapes":%d`, rt.Escapes+1), "escape bytes a row needs"},
			{`"format":"lossless12"`, "without escapes"},
		} {
			q := t.TempDir()
			for _, n := range []string{trunk.BinName, trunk.LayoutName} {
				b, err := os.ReadFile(filepath.Join(p, n))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(q, n), b, 0o644))
			}
			js, err := os.ReadFile(filepath.Join(q, trunk.LayoutName))
			require.NoError(t, err)
			i := bytes.Index(js, []byte(`"`+rt.Name+`"`))
			require.Positive(t, i)
			j := i + bytes.Index(js[i:], []byte(esc))
			require.Greater(t, j, i)
			js = append(js[:j:j], append([]byte(c.to), js[j+len(esc):]...)...)
			require.NoError(t, os.WriteFile(filepath.Join(q, trunk.LayoutName), js, 0o644))
			_, err = k3.Open(dir, k3.WithPackedTrunk(q))
			require.ErrorIs(t, err, trunk.ErrLayout, c.to)
			assert.Contains(t, err.Error(), c.msg, c.to)
		}
	})
}

// TestPackedEmbedHeadFaults: the embedding table and the head of a lossless12 pack are covered
// like its layers. A flipped bit fails the run's checksum, under its name, in Verify and in the
// model, resident (at Open) or streamed (at the first forward); a malformed block whose checksum
// was made to match is refused by tensor name, never decoded into a weight — for the streamed
// embedding in the row the forward reads.
func TestPackedEmbedHeadFaults(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	runs := []struct {
		name string // as the errors say
		item int
		run  func(l *trunk.Layout) trunk.LayerRun
	}{
		{"embedding", trunk.Embed, func(l *trunk.Layout) trunk.LayerRun { return *l.Embedding }},
		{"lm_head", trunk.Head, func(l *trunk.Layout) trunk.LayerRun { return *l.Head }},
	}
	// open opens the model on the pack p, resident or at its floor, and runs a forward.
	open := func(t *testing.T, p string, resident bool) error {
		opts := []k3.Option{k3.WithPackedTrunk(p, trunk.SourcePacked)}
		if !resident {
			fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(p, trunk.SourcePacked))
			opts = append(opts, k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot))
		}
		m, err := k3.Open(dir, opts...)
		if err != nil {
			return err
		}
		defer m.Close()
		_, err = m.Forward(t.Context(), ref.FullIDs)
		return err
	}
	for _, c := range runs {
		for _, resident := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/flipped-bit/resident=%v", c.name, resident), func(t *testing.T) {
				p, l := packLossless12(t, dir)
				r := c.run(l)
				rt := r.Tensors[0]
				require.Equal(t, trunk.FormatLossless12, rt.Format)
				// A mantissa bit of a weight in the middle row: the matrix stays well-formed (of other
				// weights), so only the checksum can catch it.
				rows, cols := rt.Shape[0], rt.Shape[1]
				rowBytes := (rt.NBytes - lossless12.HeaderSize) / rows
				mid := lossless12.HeaderSize + rows/2*rowBytes + (cols+lossless12.BlockSize-1)/lossless12.BlockSize + 1
				testkit.FlipBits(t, filepath.Join(p, trunk.BinName), r.FileOff+rt.Off+mid, 0x04)
				err := open(t, p, resident)
				require.ErrorIs(t, err, trunk.ErrChecksum)
				assert.Contains(t, err.Error(), c.name)
				err = verifyPacked(t, dir, p)
				require.ErrorIs(t, err, trunk.ErrChecksum)
				le, ok := errors.AsType[*trunk.LayerError](err)
				require.True(t, ok)
				assert.Equal(t, c.item, le.Layer)
			})
			t.Run(fmt.Sprintf("%s/malformed-block/resident=%v", c.name, resident), func(t *testing.T) {
				p, l := packLossless12(t, dir)
				r := c.run(l)
				rt := r.Tensors[0]
				row := int64(ref.FullIDs[0]) // a row every forward reads: the first token's embedding
				rowBytes := (rt.NBytes - lossless12.HeaderSize) / rt.Shape[0]
				// The row's first window base, above the largest a window may have (lossless12.MaxBase).
				patchBin(t, p, r, r.FileOff+rt.Off+lossless12.HeaderSize+row*rowBytes, []byte{lossless12.MaxBase + 1}, true)
				err := verifyPacked(t, dir, p)
				require.ErrorIs(t, err, lossless12.ErrMalformed)
				assert.NotErrorIs(t, err, trunk.ErrChecksum)
				err = open(t, p, resident)
				require.ErrorIs(t, err, lossless12.ErrMalformed)
				assert.Contains(t, err.Error(), rt.Name)
			})
		}
	}
}

// TestPackedWithoutEmbedHead: a lossless12 pack whose trunk.json lacks the "embedding" and
// "head" runs (as every pack written before they existed) still opens: the shards provide
// both, in bf16, and the logits are the mapped run's.
func TestPackedWithoutEmbedHead(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	want := runModel(t, openModel(t, dir), ref)
	p, _ := packLossless12(t, dir)
	path := filepath.Join(p, trunk.LayoutName)
	js, err := os.ReadFile(path)
	require.NoError(t, err)
	var d map[string]any
	require.NoError(t, json.Unmarshal(js, &d))
	require.Contains(t, d, "embedding")
	require.Contains(t, d, "head")
	delete(d, "embedding")
	delete(d, "head")
	js, err = json.Marshal(d)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, js, 0o644))

	fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot), k3.WithPackedTrunk(p, trunk.SourcePacked))
	for _, opts := range [][]k3.Option{nil, {k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot)}} {
		m := openModel(t, dir, append(opts, k3.WithPackedTrunk(p, trunk.SourcePacked))...)
		c := m.Config()
		assert.Equal(t, int64(c.Vocab)*int64(c.Hidden)*2, m.Plan().Trunk.HeadBytes, "the head in bf16, from the shards")
		assert.Equal(t, want, runModel(t, m, ref))
		assert.Equal(t, c.NumLayers, m.Stats().Trunk.Verified, "the layers only")
	}
}
