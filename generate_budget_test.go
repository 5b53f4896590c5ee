package k3_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sample"
)

// TestGenerationUnderBudgets: speculative decoding, seeded sampling and saved sessions give the
// same tokens and logits under a streamed trunk and a zero expert cache as with mapped weights.
func TestGenerationUnderBudgets(t *testing.T) {
	for _, dir := range testkit.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := testkit.LoadReference(t, dir)
			fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
			mapped := openModel(t, dir)
			budget := openModel(t, dir, k3.WithTrunkBudget(fl.Floor+fl.MinSlot), k3.WithTrunkSlot(smallSlot), k3.WithCacheBudget(0))
			n := len(ref.FullIDs) - len(ref.PromptIDs)
			gen := func(m *k3.Model, o k3.GenerateOptions) ([]int, uint64) {
				var steps [][]float32
				o.MaxTokens = n
				o.OnLogits = func(_ int, l []float32) { steps = append(steps, append([]float32(nil), l...)) }
				var ids []int
				for id, err := range m.Generate(context.Background(), ref.PromptIDs, o) {
					require.NoError(t, err)
					ids = append(ids, id)
				}
				return ids, testkit.Digest(steps...)
			}
			for _, k := range []int{0, 3} {
				s, err := sample.New(sample.Options{Temperature: 0.8, TopP: 0.9, Seed: 7})
				require.NoError(t, err)
				s2, err := sample.New(sample.Options{Temperature: 0.8, TopP: 0.9, Seed: 7})
				require.NoError(t, err)
				for _, c := range []struct {
					name   string
					o1, o2 k3.GenerateOptions
				}{
					{"greedy", k3.GenerateOptions{Speculative: k}, k3.GenerateOptions{Speculative: k}},
					{"sampled", k3.GenerateOptions{Speculative: k, Sampler: s}, k3.GenerateOptions{Speculative: k, Sampler: s2}},
				} {
					t.Run(fmt.Sprintf("%s/spec%d", c.name, k), func(t *testing.T) {
						a, da := gen(mapped, c.o1)
						b, db := gen(budget, c.o2)
						assert.Equal(t, a, b)
						assert.Equal(t, da, db)
						if c.name == "greedy" {
							assert.Equal(t, ref.FullIDs[len(ref.PromptIDs):], b)
						}
					})
				}
			}
			// A session saved under budgets continues like one saved from mapped weights.
			half := len(ref.FullIDs) / 2
			var saved [2]bytes.Buffer
			for i, m := range []*k3.Model{mapped, budget} {
				s := m.NewSession()
				require.NoError(t, s.Prefill(context.Background(), ref.FullIDs[:half]))
				require.NoError(t, s.Save(&saved[i], nil))
			}
			assert.Equal(t, saved[0].Bytes(), saved[1].Bytes(), "the state does not depend on where weights live")
			s, _, err := k3.LoadSession(budget, bytes.NewReader(saved[0].Bytes()))
			require.NoError(t, err)
			rows, err := s.PrefillAll(context.Background(), ref.FullIDs[half:])
			require.NoError(t, err)
			all, err := mapped.Forward(context.Background(), ref.FullIDs)
			require.NoError(t, err)
			assert.Equal(t, testkit.Digest(all[half:]...), testkit.Digest(rows...))
		})
	}
}
