package config

// K3 returns the configuration of the released Kimi K3 text model (§1.5
// and the K3 column of §2.3): 93 layers, Gated MLA at one-based layers
// 4, 8, …, 92 and 93 (24 layers), KDA elsewhere including layer 0, and
// eos_token_id 163586 (<|end_of_msg|>, §10.2). Each call returns a
// fresh value the caller may modify.
func K3() *Config {
	const layers = 93
	var full, kda []int
	for l := 1; l <= layers; l++ {
		if l%4 == 0 || l == layers {
			full = append(full, l)
		} else {
			kda = append(kda, l)
		}
	}
	return &Config{
		Hidden: 7168, NumLayers: layers, Vocab: 163840, RMSEps: 1e-5,
		KDAHeads: 96, KDAHeadDim: 128, ConvK: 4, GateLB: -5,
		FullAttn: full, KDALayers: kda,
		MLAHeads: 96, QLoRA: 1536, KVLoRA: 512, QKNope: 128, QKRope: 64, VHead: 128, MLAOutGate: true,
		NumExperts: 896, TopK: 16, NumShared: 2, Latent: 3584, MoEInter: 3072, RoutedScale: 1,
		MoERenorm: true, LatentNorm: true,
		FirstDense: 1, DenseInter: 33792, AttnResBlock: 12,
		SiTUBeta: 4, SiTULinearBeta: 25,
		EOSTokenIDs: []int{163586},
	}
}
