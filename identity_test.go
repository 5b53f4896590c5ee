package k3_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/quant/rans"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
	"github.com/k3-project/k3/trunk"
)

// The attacks of issue 28 on a model's identity: a same-geometry sibling's state or packed
// trunk, and files changed in place while a model runs (§3.6, §7.7).

// siblings synthesizes two tiny checkpoints of one geometry from different seeds: same
// configuration, same tensor set, same file sizes, different weights.
func siblings(t *testing.T) (a, b string) {
	t.Helper()
	a, b = synthTiny(t, 11), synthTiny(t, 12)
	for _, name := range testkit.DirNames(t, a) {
		sa, err := os.Stat(filepath.Join(a, name))
		require.NoError(t, err)
		sb, err := os.Stat(filepath.Join(b, name))
		require.NoError(t, err)
		require.Equal(t, sa.Size(), sb.Size(), "%s: a sibling's file of the same size", name)
	}
	return a, b
}

// shardOf returns the path of the first safetensors shard of dir.
func shardOf(t *testing.T, dir string) string {
	t.Helper()
	shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	require.NoError(t, err)
	require.NotEmpty(t, shards)
	return shards[0]
}

// overwrite writes src's bytes over dst in place — same inode, same size, as cp or
// rsync --inplace or dd would — after a pause longer than a file-system timestamp tick.
func overwrite(t testing.TB, dst, src string, off int64) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	f, err := os.OpenFile(dst, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(data[off:], off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// requireChanged asserts that err reports path as changed — by its identity
// (*storage.ChangedError) or, for bytes streamed under a budget, by a piece that differs from
// its first read (*trunk.ReadError) — and that the session gives no token afterwards.
func requireChanged(t *testing.T, err error, path string, s *k3.Session) {
	t.Helper()
	require.ErrorIs(t, err, storage.ErrChanged)
	var named string
	if ce, ok := errors.AsType[*storage.ChangedError](err); ok {
		named = ce.Path
	} else if re, ok := errors.AsType[*trunk.ReadError](err); ok {
		named = re.File
	}
	require.Equal(t, path, named, "%v names the file", err)
	_, nerr := s.Next()
	require.ErrorIs(t, nerr, k3.ErrBroken, "no token from a pass that overlapped a change")
}

// onLayer is a Tracer that runs fn once, after the first layer of the pass it is armed for.
type onLayer struct {
	mu  sync.Mutex
	arm bool
	fn  func()
}

func (*onLayer) ExpertRequest(int, int)                     {}
func (*onLayer) TrunkRead(int, int64, int64, time.Duration) {}
func (o *onLayer) LayerDone(layer int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.arm && layer == 0 {
		o.arm = false
		o.fn()
	}
}

// armedStep prefills a new session of m, then steps it once with tr armed, so that tr's fn runs
// after the step's first layer; it returns the session and the step's error.
func armedStep(t *testing.T, m *k3.Model, tr *onLayer) (*k3.Session, error) {
	t.Helper()
	s := m.NewSession()
	ctx := context.Background()
	require.NoError(t, s.Prefill(ctx, []int{1, 2, 3}))
	id, err := s.Next()
	require.NoError(t, err)
	tr.mu.Lock()
	tr.arm = true
	tr.mu.Unlock()
	return s, s.Step(ctx, id)
}

// budgeted returns the options that stream the dense weights of dir at the trunk's floor.
func budgeted(t *testing.T, dir string, opts ...k3.Option) []k3.Option {
	t.Helper()
	p, err := k3.PlanFor(dir, append(opts, k3.WithTrunkBudget(1<<40))...)
	require.NoError(t, err)
	return append(opts, k3.WithTrunkBudget(p.Trunk.Floor))
}

// TestShardRewrittenInPlace: a shard rewritten in place with a sibling's bytes of the same size,
// between two steps or during one, mapped or under a budget, fails the next or the overlapped
// pass with a *storage.ChangedError naming the shard, and no token comes from it.
func TestShardRewrittenInPlace(t *testing.T) {
	a, b := siblings(t)
	for _, mode := range []string{"mapped", "budgeted"} {
		for _, when := range []string{"between steps", "during a step"} {
			t.Run(mode+"/"+when, func(t *testing.T) {
				dir := testkit.CopyDir(t, a)
				shard := shardOf(t, dir)
				sibling := filepath.Join(b, filepath.Base(shard))
				tr := &onLayer{fn: func() { overwrite(t, shard, sibling, 0) }}
				opts := []k3.Option{k3.WithTracer(tr)}
				if mode == "budgeted" {
					opts = budgeted(t, dir, opts...)
				}
				m := openModel(t, dir, opts...)
				s := m.NewSession()
				ctx := context.Background()
				require.NoError(t, s.Prefill(ctx, []int{1, 2, 3}))
				id, err := s.Next()
				require.NoError(t, err)
				if when == "between steps" {
					overwrite(t, shard, sibling, 0)
				} else {
					tr.mu.Lock()
					tr.arm = true
					tr.mu.Unlock()
				}
				requireChanged(t, s.Step(ctx, id), shard, s)
				// A new session of the model fails too: the file is not what was opened.
				fresh := m.NewSession()
				requireChanged(t, fresh.Prefill(ctx, []int{1}), shard, fresh)
			})
		}
	}
}

// TestPackedTrunkOverwrittenMidRun: one layer's bytes copied over another's inside trunk.bin
// (dd conv=notrunc) during a budgeted run fail that pass with a *storage.ChangedError naming
// trunk.bin.
func TestPackedTrunkOverwrittenMidRun(t *testing.T) {
	dir := synthTiny(t, 13)
	pdir := t.TempDir()
	require.NoError(t, checkpoint.PackTrunk(dir, pdir, nil))
	cfg := openModel(t, dir).Config()
	l, err := trunk.ReadLayout(pdir, cfg.NumLayers, trunk.Expect{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(l.Layers), 3)
	bin := filepath.Join(pdir, trunk.BinName)
	dd := func() {
		f, err := os.OpenFile(bin, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		src, dst := l.Layers[1], l.Layers[2]
		buf := make([]byte, min(src.Unpadded, dst.Unpadded))
		_, err = f.ReadAt(buf, src.FileOff)
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond)
		_, err = f.WriteAt(buf, dst.FileOff)
		require.NoError(t, err)
	}
	tr := &onLayer{fn: dd}
	m := openModel(t, dir, budgeted(t, dir, k3.WithPackedTrunk(pdir), k3.WithTracer(tr))...)
	s, err := armedStep(t, m, tr)
	requireChanged(t, err, bin, s)
}

// TestPackedTrunkOfSiblingRefused: a trunk packed from a same-geometry sibling is refused at
// open with trunk.ErrOtherModel, and so is one whose trunk.json names no model; the model's own
// pack opens.
func TestPackedTrunkOfSiblingRefused(t *testing.T) {
	a, b := siblings(t)
	own, other := t.TempDir(), t.TempDir()
	require.NoError(t, checkpoint.PackTrunk(a, own, nil))
	require.NoError(t, checkpoint.PackTrunk(b, other, nil))
	openModel(t, a, k3.WithPackedTrunk(own))
	_, err := k3.Open(a, k3.WithPackedTrunk(other))
	require.ErrorIs(t, err, trunk.ErrOtherModel)
	require.ErrorContains(t, err, "packed from model")

	js, err := os.ReadFile(filepath.Join(own, trunk.LayoutName))
	require.NoError(t, err)
	m := openModel(t, a)
	tag := []byte(`,"model":"` + m.Integrity().Identity.String() + `"`)
	require.Equal(t, 1, bytes.Count(js, tag), "trunk.json names the model")
	require.NoError(t, os.WriteFile(filepath.Join(own, trunk.LayoutName), bytes.Replace(js, tag, nil, 1), 0o644))
	_, err = k3.Open(a, k3.WithPackedTrunk(own))
	require.ErrorIs(t, err, trunk.ErrOtherModel)
	require.ErrorContains(t, err, "names no model")
}

// TestStateOfSiblingRefused: a state saved by a same-geometry sibling is refused
// (StateOtherModel, at the identity's offset); the model's own compress-experts copy, which
// keeps its identity, loads it and continues bit-identically.
func TestStateOfSiblingRefused(t *testing.T) {
	a, b := siblings(t)
	ma, mb := openModel(t, a), openModel(t, b)
	require.NotEqual(t, ma.Integrity().Identity, mb.Integrity().Identity)
	s := ma.NewSession()
	ctx := context.Background()
	require.NoError(t, s.Prefill(ctx, []int{1, 2, 3}))
	data := saveState(t, s, nil)

	_, _, err := k3.LoadSession(mb, bytes.NewReader(data))
	r, at := refusal(err)
	require.Equal(t, k3.StateOtherModel, r, "%v", err)
	require.Equal(t, int64(128), at, "the identity's offset")

	mc := openModel(t, repackExperts(t, a))
	require.Equal(t, ma.Integrity().Identity, mc.Integrity().Identity, "a coded copy keeps its model's identity")
	sc, _, err := k3.LoadSession(mc, bytes.NewReader(data))
	require.NoError(t, err)
	require.NoError(t, s.Step(ctx, 4))
	require.NoError(t, sc.Step(ctx, 4))
	testkit.RequireSameBits(t, "logits after the restored step", sc.Logits(), s.Logits())
}

// TestCodedCopyOfChangedModelRefused: a compress-experts copy's manifest names its model; when
// the copy's dense bytes change afterwards (its expert-free shards are links to the source, which
// was updated in place), Open refuses it with rans.ErrOtherModel, and verify-experts does too.
func TestCodedCopyOfChangedModelRefused(t *testing.T) {
	dir := synthTiny(t, 14)
	coded := repackExperts(t, dir)
	m := openModel(t, coded)
	js, err := os.ReadFile(filepath.Join(coded, rans.ManifestFileName))
	require.NoError(t, err)
	require.Contains(t, string(js), `"model": "`+m.Integrity().Identity.String()+`"`)
	require.NoError(t, m.Close())

	ck, err := safetensors.Open(coded)
	require.NoError(t, err)
	emb, ok := ck.Tensor(layout.EmbedName)
	require.True(t, ok)
	require.NoError(t, ck.Close())
	// Break the link first, so that the source stays as it was.
	data, err := os.ReadFile(emb.File)
	require.NoError(t, err)
	require.NoError(t, os.Remove(emb.File))
	require.NoError(t, os.WriteFile(emb.File, data, 0o644))
	testkit.FlipBits(t, emb.File, emb.Offset, 0x01)

	_, err = k3.Open(coded)
	require.ErrorIs(t, err, rans.ErrOtherModel)
	_, err = rans.Verify(coded, rans.VerifyOptions{Workers: 1})
	require.ErrorIs(t, err, rans.ErrOtherModel)
	openModel(t, dir) // the source is untouched
}

// TestChangeNamedBeforeItsSymptom: a shard truncated during a step whose routed experts are read
// per token fails the step with the change named, not with the failed expert read it caused
// (which alone would report a dropped expert).
func TestChangeNamedBeforeItsSymptom(t *testing.T) {
	dir := testkit.CopyDir(t, synthTiny(t, 15))
	var shards []string
	tr := &onLayer{fn: func() {
		time.Sleep(20 * time.Millisecond)
		for _, s := range shards {
			require.NoError(t, os.Truncate(s, 200))
		}
	}}
	shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	require.NoError(t, err)
	m := openModel(t, dir, k3.WithTrunkBudget(1<<30), k3.WithCacheBudget(0), k3.WithTracer(tr))
	_, err = armedStep(t, m, tr)
	require.ErrorIs(t, err, storage.ErrChanged)
	_, isLoad := errors.AsType[*cache.ExpertLoadError](err)
	require.False(t, isLoad, "%v: the symptom is not the error", err)
	ce, ok := errors.AsType[*storage.ChangedError](err)
	require.True(t, ok, "%v", err)
	require.Contains(t, shards, ce.Path)
}
