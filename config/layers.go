package config

import (
	"fmt"
	"sort"
)

// The layer map (§2.6). Every method takes a ZERO-based layer index;
// FullAttn holds ONE-based numbers, hence the +1 / −1 below. Methods are
// total: an index outside 0..NumLayers−1 is neither MLA nor KDA, dense or a
// boundary, and they never panic, even on a Config that fails Validate.

// IsMLA reports whether layer (zero-based) is a Gated MLA layer, i.e.
// layer+1 is listed in FullAttn.
func (c *Config) IsMLA(layer int) bool {
	if layer < 0 || layer >= c.NumLayers {
		return false
	}
	for _, l := range c.FullAttn {
		if l == layer+1 {
			return true
		}
	}
	return false
}

// IsKDA reports whether layer (zero-based) is a Kimi Delta Attention layer:
// every layer in range that is not MLA.
func (c *Config) IsKDA(layer int) bool {
	return layer >= 0 && layer < c.NumLayers && !c.IsMLA(layer)
}

// IsDense reports whether layer (zero-based) uses the dense FFN instead of
// the LatentMoE (layer < FirstDense).
func (c *Config) IsDense(layer int) bool {
	return layer >= 0 && layer < c.NumLayers && layer < c.FirstDense
}

// IsBoundary reports whether layer (zero-based) starts an Attention
// Residuals block (layer mod AttnResBlock == 0; layer 0 always does).
func (c *Config) IsBoundary(layer int) bool {
	return layer >= 0 && layer < c.NumLayers && c.AttnResBlock > 0 && layer%c.AttnResBlock == 0
}

// Block returns the Attention Residuals block holding layer (zero-based), or
// −1 for an index out of range.
func (c *Config) Block(layer int) int {
	if layer < 0 || layer >= c.NumLayers || c.AttnResBlock <= 0 {
		return -1
	}
	return layer / c.AttnResBlock
}

// NumBlocks returns the number of Attention Residuals blocks,
// ceil(NumLayers / AttnResBlock).
func (c *Config) NumBlocks() int {
	if c.NumLayers <= 0 || c.AttnResBlock <= 0 {
		return 0
	}
	return (c.NumLayers + c.AttnResBlock - 1) / c.AttnResBlock
}

// MLALayers returns the zero-based indices of the MLA layers, ascending.
func (c *Config) MLALayers() []int {
	out := make([]int, 0, len(c.FullAttn))
	for _, l := range c.FullAttn {
		if l >= 1 && l <= c.NumLayers {
			out = append(out, l-1)
		}
	}
	sort.Ints(out)
	// Drop repeats so the result is a set even for an unvalidated Config.
	w := 0
	for i, l := range out {
		if i == 0 || l != out[w-1] {
			out[w] = l
			w++
		}
	}
	return out[:w]
}

// KDALayerIndices returns the zero-based indices of the KDA layers,
// ascending (derived from FullAttn, not from the file's kda_layers).
func (c *Config) KDALayerIndices() []int {
	if c.NumLayers <= 0 || c.NumLayers > MaxDim {
		return nil
	}
	mla := c.MLALayers()
	out := make([]int, 0, c.NumLayers-len(mla))
	j := 0
	for l := 0; l < c.NumLayers; l++ {
		if j < len(mla) && mla[j] == l {
			j++
			continue
		}
		out = append(out, l)
	}
	return out
}

// NumMLA returns the number of MLA layers.
func (c *Config) NumMLA() int { return len(c.MLALayers()) }

// NumKDA returns the number of KDA layers.
func (c *Config) NumKDA() int {
	if c.NumLayers <= 0 {
		return 0
	}
	return c.NumLayers - c.NumMLA()
}

// MLASlot returns the number of MLA layers with index < layer (zero-based):
// the dense position of an MLA layer's cache among all MLA caches.
func (c *Config) MLASlot(layer int) int {
	n := 0
	for _, l := range c.MLALayers() {
		if l < layer {
			n++
		}
	}
	return n
}

// KDASlot returns the number of KDA layers with index < layer (zero-based):
// the dense position of a KDA layer's state among all KDA states.
func (c *Config) KDASlot(layer int) int {
	if layer <= 0 {
		return 0
	}
	if layer > c.NumLayers {
		layer = c.NumLayers
	}
	return layer - c.MLASlot(layer)
}

// LayerKinds returns one letter per layer, 'M' for MLA and 'K' for KDA, e.g.
// "KKKMKKKMKKKMM" for the tiny fixture; "" when NumLayers is out of range.
func (c *Config) LayerKinds() string {
	if c.NumLayers <= 0 || c.NumLayers > MaxDim {
		return ""
	}
	b := make([]byte, c.NumLayers)
	for i := range b {
		b[i] = 'K'
	}
	for _, l := range c.MLALayers() {
		b[l] = 'M'
	}
	return string(b)
}

// Summary returns a one-line description, e.g.
// "hidden=7168 layers=93 vocab=163840 | 24 MLA + 69 KDA | experts 896 top16 shared2 | latent=3584".
func (c *Config) Summary() string {
	return fmt.Sprintf("hidden=%d layers=%d vocab=%d | %d MLA + %d KDA | experts %d top%d shared%d | latent=%d",
		c.Hidden, c.NumLayers, c.Vocab, c.NumMLA(), c.NumKDA(), c.NumExperts, c.TopK, c.NumShared, c.Latent)
}
