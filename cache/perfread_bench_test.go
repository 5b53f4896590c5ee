package cache_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/require"
)

// Zero-budget reads of the perf checkpoint's experts (K3_PERF_DIR, direct
// I/O, nothing else running in the process): a call of n distinct random
// experts of one MoE layer, the layers in turn, as a MoE layer at the trunk
// floor asks for them — 4 is a half-wave of the TopK 8 scratch, 8 a full
// wave — on 1, 4 or 8 read workers (1: one read in flight, as a shared walk
// at the floor reads its half-waves of one expert; against 4 and 8 it shows
// whether the device gains from concurrent reads). Throughput is the
// experts' stored bytes over the calls' wall time:
//
//	K3_PERF_DIR=<dir> go test ./cache -run '^$' -bench PerfExpertReads -benchtime 200x
//
// The checkpoint must exist (the root package's benchmarks synthesize it).
func BenchmarkPerfExpertReads(b *testing.B) {
	c, ck, layers := openPerf(b)
	for _, n := range []int{4, 8} {
		for _, workers := range []int{1, 4, 8} {
			b.Run("experts="+strconv.Itoa(n)+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK},
					cache.WithReadWorkers(workers))
				require.NoError(b, err)
				defer s.Close()
				r := rand.New(rand.NewPCG(1, uint64(n)))
				ids := make([]int, n)
				var dst []moe.Expert
				i := 0
				for b.Loop() {
					for j, e := range r.Perm(c.NumExperts)[:n] {
						ids[j] = e
					}
					out, release, err := s.Experts(layers[i%len(layers)], ids, dst)
					if err != nil {
						b.Fatal(err)
					}
					release()
					dst, i = out, i+1
				}
				st := s.Stats()
				b.ReportMetric(float64(st.Run.BytesRead)/st.Run.LoadSeconds/1e9, "GB/s")
			})
		}
	}
}

// The MoE layers of the perf checkpoint at budget 0 (TopK scratch slots, two
// workers) over rows random positions a call, as a shared walk of that many
// sessions runs them: "overlap" with the Store as it is (half-waves, the
// next read while the current one runs), "serial" with the Store behind a
// wrapper that hides moe.WaveOverlapper (whole waves, read then run). Every
// iteration runs the twelve layers once each way, in turn, so that a noisy
// host slows both alike; each way's mean time per iteration is reported:
//
//	K3_PERF_DIR=<dir> go test ./cache -run '^$' -bench PerfMoEWaves -benchtime 20x
func BenchmarkPerfMoEWaves(b *testing.B) {
	c, ck, layers := openPerf(b)
	s, err := cache.New(ck, cache.Config{Layers: layers, NumExperts: c.NumExperts, TopK: c.TopK})
	require.NoError(b, err)
	defer s.Close()
	serial := struct {
		moe.ExpertSource
		moe.BatchLimiter
	}{s, s}
	for _, rows := range []int{1, 8} {
		r := rand.New(rand.NewPCG(2, uint64(rows)))
		x := make([]float32, rows*c.Hidden)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		out := make([]float32, len(x))
		ways := []struct {
			name string
			ms   []*moe.MoE
			d    time.Duration
		}{{name: "overlap"}, {name: "serial"}}
		for i, src := range []moe.ExpertSource{s, serial} {
			for _, l := range layers {
				m, err := moe.New(moeConfig(c, l, 2), moeWeights(b, ck, c, l), src)
				require.NoError(b, err)
				ways[i].ms = append(ways[i].ms, m)
			}
		}
		ws := moe.NewWorkspace()
		b.Run("rows="+strconv.Itoa(rows), func(b *testing.B) {
			for i := range ways {
				ways[i].d = 0
			}
			n := 0
			for b.Loop() {
				for i := range ways {
					t0 := time.Now()
					for _, m := range ways[i].ms {
						if err := m.ForwardRoutedWith(out, x, rows, nil, ws); err != nil {
							b.Fatal(err)
						}
					}
					ways[i].d += time.Since(t0)
				}
				n++
			}
			for _, w := range ways {
				b.ReportMetric(w.d.Seconds()*1e3/float64(n), w.name+"-ms")
			}
		})
	}
}

// openPerf opens the perf checkpoint of K3_PERF_DIR and lists its MoE
// layers, skipping when there is none.
func openPerf(b *testing.B) (*config.Config, *safetensors.Checkpoint, []int) {
	if testing.Short() {
		b.Skip("perf checkpoint: skipped under -short")
	}
	dir := os.Getenv(testkit.PerfEnv)
	if dir == "" {
		b.Skipf("set %s to the perf checkpoint's directory", testkit.PerfEnv)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		b.Skipf("no perf checkpoint in %s (the root package's benchmarks write it): %v", dir, err)
	}
	c, ck := openModelDir(b, dir)
	var layers []int
	for l := range c.NumLayers {
		if !c.IsDense(l) {
			layers = append(layers, l)
		}
	}
	return c, ck, layers
}
