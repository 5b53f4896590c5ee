package cache_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/safetensors"
	"github.com/stretchr/testify/require"
)

// Chunk-union prefill through an uncached Store reads each expert once per
// chunk of 64 positions; position by position it reads k experts per
// position. The test logs both byte counts for a 256-position prefill of
// every MoE layer and checks the union never reads more.
func TestChunkUnionPrefillBytes(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		c, err := config.Load(filepath.Join(dir, "config.json"))
		require.NoError(t, err)
		ck, err := safetensors.Open(dir)
		require.NoError(t, err)
		var layers []int
		for l := c.FirstDense; l < c.NumLayers; l++ {
			layers = append(layers, l)
		}
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
		ck.Close()
	}
}
