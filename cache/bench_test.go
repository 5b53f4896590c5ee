package cache_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/require"
)

var benchIDs = []int{3, 11, 17, 22}

// Experts reading every expert (budget 0, buffered) against a plain pread
// loop over the same bytes: the store's overhead per cold batch.
func BenchmarkGetManyCold(b *testing.B) {
	ck := openFixture(b)
	for _, mode := range []struct {
		name string
		opts []cache.Option
	}{
		{"buffered", []cache.Option{cache.WithoutDirectIO()}},
		{"buffered-1reader", []cache.Option{cache.WithoutDirectIO(), cache.WithReadWorkers(1)}},
		{"direct", nil},
	} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchIDs)) * fixExpertBytes)
			loopExperts(b, fixtureStore(b, ck, 4, 0, mode.opts...), benchIDs)
		})
	}
}

// The same bytes with os.File.ReadAt, one read per expert.
func BenchmarkPlainReadLoop(b *testing.B) {
	ck := openFixture(b)
	loopReadAt(b, ck, ck.Shards()[0], benchIDs, fixExpertBytes)
}

// All resident: the hit path.
func BenchmarkGetManyHit(b *testing.B) {
	loopExperts(b, fixtureStore(b, openFixture(b), 4, 8), benchIDs)
}

// loopExperts times one s.Experts call for ids of layer 0 per iteration.
func loopExperts(b *testing.B, s *cache.Store, ids []int) {
	var dst []moe.Expert
	for b.Loop() {
		out, release, err := s.Experts(0, ids, dst)
		if err != nil {
			b.Fatal(err)
		}
		release()
		dst = out
	}
}

// loopReadAt times what the store's cold reads replace: one os.File.ReadAt
// of size bytes per expert of ids, at the offsets of their layer-0 w1 weights
// in the shard at path.
func loopReadAt(b *testing.B, ck *safetensors.Checkpoint, path string, ids []int, size int64) {
	f, err := os.Open(path)
	require.NoError(b, err)
	defer f.Close()
	var offs []int64
	for _, e := range ids {
		t, err := ck.Require(layout.ExpertPrefix(0, e) + "w1.weight_packed")
		require.NoError(b, err)
		offs = append(offs, t.Offset)
	}
	buf := make([]byte, size)
	b.SetBytes(int64(len(ids)) * size)
	for b.Loop() {
		for _, off := range offs {
			if _, err := f.ReadAt(buf, off); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// A batch of resident experts allocates nothing (decode steady state).
func TestHitPathAllocations(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	s := fixtureStore(t, openFixture(t), 4, 8)
	dst := make([]moe.Expert, 0, 4)
	testkit.NoAllocs(t, "resident batch", 50, func() {
		out, release, err := s.Experts(0, benchIDs, dst)
		if err != nil {
			t.Fatal(err)
		}
		release()
		dst = out
	})
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}

// bigExperts writes 8 experts of 3 × [rows, cols] MXFP4 (about 3.3 MB each
// for 1024 × 2048) so that reads, not bookkeeping, dominate.
func bigExperts(b *testing.B, rows, cols int) (string, int64) {
	b.Helper()
	var ts []safetensors.WriteTensor
	for e := range 8 {
		p := layout.ExpertPrefix(0, e)
		for w := 1; w <= 3; w++ {
			packed := make([]byte, rows*cols/2)
			for i := range packed {
				packed[i] = byte(i*7 + e)
			}
			scale := make([]byte, rows*cols/32)
			for i := range scale {
				scale[i] = 127
			}
			ts = append(ts,
				safetensors.WriteTensor{Name: p + "w" + itoa(w) + ".weight_packed", DType: safetensors.U8, Shape: []int64{int64(rows), int64(cols / 2)}, Data: packed},
				safetensors.WriteTensor{Name: p + "w" + itoa(w) + ".weight_scale", DType: safetensors.U8, Shape: []int64{int64(rows), int64(cols / 32)}, Data: scale})
		}
	}
	path := filepath.Join(b.TempDir(), "model.safetensors")
	require.NoError(b, safetensors.WriteFile(path, ts, nil))
	return path, int64(3 * (rows*cols/2 + rows*cols/32))
}

// Cold batches of four 3.3 MB experts (budget 0, buffered, page cache warm)
// against one os.File.ReadAt per expert of the same bytes.
func BenchmarkBigCold(b *testing.B) {
	path, eb := bigExperts(b, 1024, 2048)
	ck, err := safetensors.Open(path)
	require.NoError(b, err)
	defer ck.Close()
	ids := []int{1, 3, 4, 6}
	for _, workers := range []int{1, 2, 4} {
		b.Run("store-readers="+itoa(workers), func(b *testing.B) {
			s, err := cache.New(ck, cache.Config{Layers: []int{0}, NumExperts: 8, TopK: 4},
				cache.WithoutDirectIO(), cache.WithReadWorkers(workers))
			require.NoError(b, err)
			defer s.Close()
			b.SetBytes(int64(len(ids)) * eb)
			loopExperts(b, s, ids)
		})
	}
	b.Run("plain-readat", func(b *testing.B) { loopReadAt(b, ck, path, ids, eb) })
}

// A decode step of a real MoE layer whose experts are resident in the Store
// allocates nothing (Store and moe together).
func TestDecodeStepWithStoreAllocations(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	dir := testkit.Path(t, "models/tiny")
	c, ck := openModelDir(t, dir)
	s, err := cache.New(ck, cache.Config{Layers: []int{1}, NumExperts: c.NumExperts, TopK: c.TopK,
		Budget: int64(c.NumExperts) * cache.SlotSize(3*(64*32+64*2))})
	require.NoError(t, err)
	defer s.Close()
	m, err := moe.New(moeConfig(c, 1, 1), moeWeights(t, ck, c, 1), s)
	require.NoError(t, err)
	ws := moe.NewWorkspace()
	x, out := make([]float32, c.Hidden), make([]float32, c.Hidden)
	for e := range c.NumExperts { // make every expert resident
		get(t, s, 1, e)
	}
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	testkit.NoAllocs(t, "decode step", 20, func() {
		if err := m.ForwardRoutedWith(out, x, 1, nil, ws); err != nil {
			t.Fatal(err)
		}
	})
}

// Cold reads (budget 0, one read goroutine) of a model's experts, raw and
// entropy-coded: the decode cost per load beside the read. The fixture
// model wide is repacked; K3_BENCH_RAW and K3_BENCH_CODED (both set) name a
// raw checkpoint and its compress-experts output instead.
func BenchmarkColdCoded(b *testing.B) {
	raw, coded := os.Getenv("K3_BENCH_RAW"), os.Getenv("K3_BENCH_CODED")
	if raw == "" || coded == "" {
		ms := testkit.Models(b)
		raw = ms[len(ms)-1]
		coded = repack(b, raw)
	}
	c, err := config.Load(filepath.Join(raw, "config.json"))
	require.NoError(b, err)
	for _, v := range []struct{ name, dir string }{{"raw", raw}, {"coded", coded}} {
		b.Run(v.name, func(b *testing.B) {
			ck, err := safetensors.Open(v.dir)
			require.NoError(b, err)
			defer ck.Close()
			s, err := cache.New(ck, cache.Config{Layers: []int{c.FirstDense}, NumExperts: c.NumExperts, TopK: c.TopK,
				Shapes: modelShapes(c)}, cache.WithReadWorkers(1))
			require.NoError(b, err)
			defer s.Close()
			ids := make([]int, c.TopK)
			var dst []moe.Expert
			next := 0
			b.SetBytes(int64(c.TopK) * s.ExpertBytes())
			b.ReportAllocs()
			for b.Loop() {
				for i := range ids {
					ids[i] = next % c.NumExperts
					next++
				}
				out, release, err := s.Experts(c.FirstDense, ids, dst)
				if err != nil {
					b.Fatal(err)
				}
				release()
				dst = out
			}
			st := s.Stats()
			b.ReportMetric(float64(st.Run.BytesRead)/float64(b.N), "stored-B/op")
			b.ReportMetric(st.Run.DecodeSeconds*1e9/float64(b.N), "decode-ns/op")
		})
	}
}
