package checkpoint

import "github.com/k3-project/k3/config"

// geometry is a named synthetic model shape; Geometries lists the known ones' names.
type geometry struct {
	Name        string
	Description string
	Config      config.Config
	// Shards is the number of safetensors files; tensors are assigned in layout order so each
	// layer's trunk and each expert stays inside one shard.
	Shards int
	// Sparse geometries write headers only: all tensor data are holes that read as zeros.
	Sparse bool
	// Routing, with Sparse, writes real values for the tensors that are cheap and decide which
	// experts a token selects — the embedding table, every router gate and bias, every norm gain,
	// AttnRes vector and other small vector — and leaves the large matrices (attention and FFN
	// projections, experts, output head) as holes.
	Routing bool
	// Released stores norm gains and AttnRes pseudo-queries in BF16 as the released checkpoint
	// does (otherwise F32, as the fixtures do).
	Released bool
}

// fullAttnEvery returns the one-based MLA layer list of K3's pattern: every fourth layer and the
// last one.
func fullAttnEvery(n, every int) []int {
	var l []int
	for i := every; i <= n; i += every {
		l = append(l, i)
	}
	if len(l) == 0 || l[len(l)-1] != n {
		l = append(l, n)
	}
	return l
}

// kdaLayers returns the one-based layers of 1..n not in full.
func kdaLayers(n int, full []int) []int {
	isFull := make(map[int]bool, len(full))
	for _, f := range full {
		isFull[f] = true
	}
	var l []int
	for i := 1; i <= n; i++ {
		if !isFull[i] {
			l = append(l, i)
		}
	}
	return l
}

// baseConfig is what the small geometries share with K3: its layer pattern, the SiTU caps, the
// MoE wiring.
func baseConfig(hidden, layers, vocab int) config.Config {
	full := fullAttnEvery(layers, 4)
	return config.Config{
		Hidden: hidden, NumLayers: layers, Vocab: vocab, RMSEps: 1e-5,
		ConvK: 4, GateLB: -5, FullAttn: full, KDALayers: kdaLayers(layers, full),
		MLAOutGate: true, NumShared: 2, RoutedScale: 1, MoERenorm: true, LatentNorm: true,
		FirstDense: 1, SiTUBeta: 4, SiTULinearBeta: 25,
	}
}

// knownGeometries returns the geometries Synthesize accepts, smallest first.
func knownGeometries() []geometry {
	tiny := baseConfig(128, 13, 256)
	tiny.KDAHeads, tiny.KDAHeadDim = 4, 16
	tiny.MLAHeads, tiny.QLoRA, tiny.KVLoRA, tiny.QKNope, tiny.QKRope, tiny.VHead = 4, 64, 32, 24, 8, 16
	tiny.NumExperts, tiny.TopK, tiny.Latent, tiny.MoEInter = 8, 2, 64, 64
	tiny.DenseInter, tiny.AttnResBlock = 96, 3

	perf := baseConfig(2048, 13, 32768)
	perf.KDAHeads, perf.KDAHeadDim = 16, 128
	perf.MLAHeads, perf.QLoRA, perf.KVLoRA, perf.QKNope, perf.QKRope, perf.VHead = 16, 512, 256, 128, 64, 128
	perf.NumExperts, perf.TopK, perf.Latent, perf.MoEInter = 64, 8, 1024, 512
	perf.DenseInter, perf.AttnResBlock = 4096, 3

	k3 := *config.K3() // the released model's dimensions, from the config package

	return []geometry{
		{Name: "tiny", Description: "the models/tiny fixture's shape: hidden 128, 13 layers, vocab 256, 8 experts top-2 (3.7 MB)",
			Config: tiny, Shards: 3},
		{Name: "perf", Description: "a benchmark shape: hidden 2048, 13 layers, vocab 32768, KDA 16x128, 64 experts top-8 (about 1.5 GB)",
			Config: perf, Shards: 4},
		{Name: "k3", Description: "the real Kimi K3 text model's shapes, 93 layers, 96 shards, 1.56 TB written as sparse files (headers only, data read as zeros)",
			Config: k3, Shards: 96, Sparse: true, Released: true},
		{Name: "k3-routed", Description: "the k3 geometry with real embedding, router gates and biases, norms and AttnRes vectors (about 3.6 GB on disk), so tokens route to different experts per layer and per token",
			Config: k3, Shards: 96, Sparse: true, Released: true, Routing: true},
	}
}

// lookupGeometry returns the geometry with the given name.
func lookupGeometry(name string) (geometry, bool) {
	for _, g := range knownGeometries() {
		if g.Name == name {
			return g, true
		}
	}
	return geometry{}, false
}
