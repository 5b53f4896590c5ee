package layout_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/layout"
	"github.com/k3-project/k3/safetensors"
)

func TestLayerOf(t *testing.T) {
	for name, want := range map[string]int{
		"language_model.model.layers.0.mlp.up_proj.weight":                          0,
		"language_model.model.layers.92.self_attn.A_log":                            92,
		"language_model.model.layers.7.block_sparse_moe.experts.3.w1.weight_packed": 7,
		"language_model.model.layers.07.mlp.up_proj.weight":                         -1,
		"language_model.model.layers.-1.mlp.up_proj.weight":                         -1,
		"language_model.model.layers.1234567890.mlp":                                -1,
		"language_model.model.layers.3":                                             -1,
		"language_model.model.norm.weight":                                          -1,
		"vision_tower.layers.3.weight":                                              -1,
	} {
		l, ok := layout.LayerOf(name)
		assert.Equal(t, want >= 0, ok, name)
		assert.Equal(t, want, l, name)
	}
}

func TestParseExpert(t *testing.T) {
	l, e, key, ok := layout.ParseExpert(layout.ExpertPrefix(12, 383) + "w2.weight_scale")
	assert.True(t, ok)
	assert.Equal(t, []any{12, 383, "w2.weight_scale"}, []any{l, e, key})
	for _, name := range []string{
		layout.ExpertPrefix(1, 2) + "w4.weight_packed",
		layout.LayerPrefix(1) + "block_sparse_moe.experts.02.w1.weight_packed",
		layout.LayerPrefix(1) + "block_sparse_moe.shared_experts.up_proj.weight",
		layout.HeadName,
	} {
		_, _, _, ok := layout.ParseExpert(name)
		assert.False(t, ok, name)
	}
}

func TestClassify(t *testing.T) {
	for name, want := range map[string]layout.Class{
		layout.EmbedName: layout.EmbedHead, layout.HeadName: layout.EmbedHead, layout.OutProjName: layout.EmbedHead,
		layout.LayerPrefix(4) + "self_attn.q_proj.weight":                        layout.Trunk,
		layout.LayerPrefix(4) + "block_sparse_moe.shared_experts.up_proj.weight": layout.Trunk,
		layout.ExpertPrefix(4, 9) + "w2.weight_scale":                            layout.Experts,
	} {
		c, ok := layout.Classify(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, c, name)
	}
	_, ok := layout.Classify("vision_tower.blocks.0.weight")
	assert.False(t, ok)
}

// TestTableMatchesFixtures checks the table against the fixture checkpoints: every tensor it
// lists is there with the released shape, and the checkpoint holds no text-model tensor it
// does not list.
func TestTableMatchesFixtures(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, err := config.Load(filepath.Join(dir, "config.json"))
			require.NoError(t, err)
			ck, err := safetensors.Open(dir)
			require.NoError(t, err)
			defer ck.Close()
			table := layout.Model(c)
			for l := range c.NumLayers {
				table = append(table, layout.Layer(c, l)...)
				if !c.IsDense(l) {
					for e := range c.NumExperts {
						table = append(table, layout.Expert(c, l, e)...)
					}
				}
			}
			listed := map[string]bool{}
			for _, want := range table {
				listed[want.Name] = true
				got, ok := ck.Tensor(want.Name)
				if !assert.True(t, ok, "%s is not in the checkpoint", want.Name) {
					continue
				}
				shape := make([]int, len(got.Shape))
				for i, d := range got.Shape {
					shape[i] = int(d)
				}
				assert.True(t, slices.Equal(want.Shape, shape) || slices.Equal(want.Alt, shape),
					"%s: shape %v, the table says %v (or %v)", want.Name, shape, want.Shape, want.Alt)
				c, _ := layout.Classify(want.Name)
				assert.Equal(t, want.Class, c, want.Name)
				if l, _, key, ok := layout.ParseExpert(want.Name); ok || want.Class == layout.Experts {
					assert.True(t, ok, want.Name)
					assert.Equal(t, want.Layer, l, want.Name)
					assert.Equal(t, want.Key, key, want.Name)
				}
				if l, ok := layout.LayerOf(want.Name); ok {
					assert.Equal(t, want.Layer, l, want.Name)
				} else {
					assert.Equal(t, -1, want.Layer, want.Name)
				}
			}
			for _, ts := range ck.Tensors() {
				if _, text := layout.Classify(ts.Name); text {
					assert.True(t, listed[ts.Name], "%s is not in the table", ts.Name)
				}
			}
		})
	}
}
