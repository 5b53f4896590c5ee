package k3_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
)

// specConfigs are the mapped and trunk-floor configurations of sharedConfigs.
func specConfigs(t *testing.T, dir string) []sharedConfig {
	return sharedConfigs(t, dir, false)[:2]
}

// verifyRows returns the rows a speculative verification of session i feeds after prompt p:
// the next id and a draft of two ids.
func verifyRows(next int, p []int) []int { return []int{next, p[0], p[1]} }

// TestSharedWalkVerifyRides: speculative verification rows (PrefillAll, every position's
// logits) ride in one walk with other sessions' decode steps — exactly one walk carries them
// all — and every row's logits are bit-identical to the sessions run alone; then concurrent
// generations, some speculative and some plain, emit the ids and logits they emit alone, with
// the same rows in fewer walks. Every fixture model, mapped and at the trunk floor, 1 and 2
// threads.
func TestSharedWalkVerifyRides(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, _ *testkit.Reference) {
		for _, c := range specConfigs(t, dir) {
			for _, threads := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/threads=%d", c.name, threads), func(t *testing.T) {
					m := openModel(t, dir, append(c.opts, k3.WithThreads(threads))...)
					bg := context.Background()
					prompts := sharedPrompts(4, m.Config().Vocab)
					want := soloTraces(t, m, prompts, 1)
					// Sessions 0 and 2 verify drafts, 1 and 3 step: their solo results.
					wantRows := make([][][]float32, 4)
					verify := make([][]int, 4)
					for _, i := range []int{0, 2} {
						verify[i] = verifyRows(want[i].ids[0], prompts[i])
						s := m.NewSession()
						require.NoError(t, s.Prefill(bg, prompts[i]))
						rows, err := s.PrefillAll(bg, verify[i])
						require.NoError(t, err)
						wantRows[i] = rows
					}
					ss := make([]*k3.Session, 4)
					for i, p := range prompts {
						ss[i] = m.NewSession()
						require.NoError(t, ss[i].Prefill(bg, p))
					}
					before := m.Stats()
					release := k3.HoldWalks(m)
					got := make([][][]float32, 4)
					errs := make([]error, 4)
					var wg sync.WaitGroup
					for i, s := range ss {
						wg.Go(func() {
							if verify[i] != nil {
								got[i], errs[i] = s.PrefillAll(bg, verify[i])
								return
							}
							id, err := s.Next()
							if err == nil {
								err = s.Step(bg, id)
							}
							errs[i] = err
						})
					}
					release(4)
					wg.Wait()
					for i, err := range errs {
						require.NoError(t, err, "session %d", i)
					}
					st := m.Stats()
					assert.Equal(t, int64(1), st.Walks-before.Walks, "one walk")
					assert.Equal(t, int64(3+1+3+1), st.WalkRows-before.WalkRows, "the verification rows and the steps")
					for _, i := range []int{0, 2} {
						require.Len(t, got[i], len(verify[i]), "session %d rows", i)
						for k := range got[i] {
							testkit.RequireSameBits(t, fmt.Sprintf("session %d row %d", i, k), got[i][k], wantRows[i][k])
						}
						testkit.RequireSameBits(t, fmt.Sprintf("session %d last logits", i), ss[i].Logits(), wantRows[i][len(verify[i])-1])
						assert.Equal(t, len(prompts[i])+len(verify[i]), ss[i].Len(), "session %d positions", i)
					}
					for _, i := range []int{1, 3} {
						testkit.RequireSameBits(t, fmt.Sprintf("session %d step", i), ss[i].Logits(), want[i].logits[0])
					}

					t.Run("generate", func(t *testing.T) { sharedSpeculativeGenerate(t, m) })
				})
			}
		}
	})
}

// sharedSpeculativeGenerate runs four generations alone and then from goroutines (the first walk
// held until all four prefills wait): sessions 0 and 2 speculate, 1 and 3 decode plainly.
func sharedSpeculativeGenerate(t *testing.T, m *k3.Model) {
	const n, tokens = 4, 8
	// The speculating sessions get prompts where the lookup always finds a draft (a different
	// one each), the others prompts of different lengths.
	prompts := sharedPrompts(n, m.Config().Vocab)
	for i := 0; i < n; i += 2 {
		prompts[i] = lookupPrompt(m, prompts[i][0]+i)
	}
	generate := func(i int) (trace, k3.GenerateResult, error) {
		var tr trace
		var res k3.GenerateResult
		o := k3.GenerateOptions{MaxTokens: tokens, OnLogits: func(_ int, l []float32) {
			tr.logits = append(tr.logits, append([]float32(nil), l...))
		}, OnDone: func(r k3.GenerateResult) { res = r }}
		if i%2 == 0 {
			o.Speculative = 3
		}
		for id, err := range m.Generate(context.Background(), prompts[i], o) {
			if err != nil {
				return tr, res, err
			}
			tr.ids = append(tr.ids, id)
		}
		return tr, res, nil
	}
	before := m.Stats()
	want := make([]trace, n)
	for i := range n {
		var res k3.GenerateResult
		var err error
		want[i], res, err = generate(i)
		require.NoError(t, err)
		if i%2 == 0 {
			require.Positive(t, res.Verifies, "generation %d verifies drafts", i)
		}
	}
	mid := m.Stats()
	got := make([]trace, n)
	res := make([]k3.GenerateResult, n)
	errs := make([]error, n)
	release := k3.HoldWalks(m)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], res[i], errs[i] = generate(i) })
	}
	release(n)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "generation %d", i)
	}
	requireTraces(t, got, want)
	for _, i := range []int{0, 2} {
		require.Positive(t, res[i].Verifies, "generation %d verifies drafts", i)
	}
	after := m.Stats()
	soloWalks, soloRows := mid.Walks-before.Walks, mid.WalkRows-before.WalkRows
	walks, rows := after.Walks-mid.Walks, after.WalkRows-mid.WalkRows
	t.Logf("alone: %d walks of %d rows; together: %d walks of %d rows", soloWalks, soloRows, walks, rows)
	assert.Equal(t, soloRows, rows, "the same rows, verification rows included")
	assert.Less(t, walks, soloWalks, "in fewer walks")
}

// TestSharedWalkVerifyCancel: in a walk of verification rows and steps, a speculative session
// cancelled mid-walk fails alone (a *ForwardError at the layer it was seen, the session
// broken), one cancelled while queued leaves with its state intact, and the others' logits are
// bit-identical to their solo runs.
func TestSharedWalkVerifyCancel(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, _ *testkit.Reference) {
		for _, c := range specConfigs(t, dir) {
			t.Run(c.name, func(t *testing.T) {
				m := openModel(t, dir, c.opts...)
				bg := context.Background()
				prompts := sharedPrompts(4, m.Config().Vocab)
				want := soloTraces(t, m, prompts, 1)
				v2 := verifyRows(want[2].ids[0], prompts[2])
				s := m.NewSession()
				require.NoError(t, s.Prefill(bg, prompts[2]))
				want2, err := s.PrefillAll(bg, v2)
				require.NoError(t, err)

				ss := make([]*k3.Session, 4)
				for i, p := range prompts {
					ss[i] = m.NewSession()
					require.NoError(t, ss[i].Prefill(bg, p))
				}
				queued, cancelQueued := context.WithCancel(bg)
				ctxs := []context.Context{&cancelAfter{Context: bg, n: 3}, bg, bg, queued}
				release := k3.HoldWalks(m)
				errs := make([]error, 4)
				var got2 [][]float32
				var wg sync.WaitGroup
				for i, s := range ss {
					wg.Go(func() {
						if i == 1 {
							id, err := s.Next()
							if err == nil {
								err = s.Step(ctxs[i], id)
							}
							errs[i] = err
							return
						}
						rows, err := s.PrefillAll(ctxs[i], verifyRows(want[i].ids[0], prompts[i]))
						if i == 2 {
							got2 = rows
						} else if rows != nil {
							err = errors.Join(err, fmt.Errorf("session %d: rows from a failed verification", i))
						}
						errs[i] = err
					})
				}
				for k3.QueuedSteps(m) != 4 {
					time.Sleep(50 * time.Microsecond)
				}
				cancelQueued()
				release(3)
				wg.Wait()

				fe, ok := errors.AsType[*k3.ForwardError](errs[0])
				require.True(t, ok, "cancelled in the walk: %v, want a *ForwardError", errs[0])
				assert.Equal(t, 2, fe.Layer, "the layer the cancel was seen at")
				assert.ErrorIs(t, errs[0], context.Canceled)
				assert.ErrorIs(t, ss[0].Step(bg, 1), k3.ErrBroken, "the session cancelled in the walk is broken")
				assert.Equal(t, context.Canceled, errs[3], "cancelled while queued")
				assert.Equal(t, len(prompts[3]), ss[3].Len(), "the session that left the queue kept its state")
				require.NoError(t, errs[1])
				require.NoError(t, errs[2])
				testkit.RequireSameBits(t, "session 1 step", ss[1].Logits(), want[1].logits[0])
				require.Len(t, got2, len(v2))
				for k := range got2 {
					testkit.RequireSameBits(t, fmt.Sprintf("session 2 row %d", k), got2[k], want2[k])
				}
				// The session that left verifies again, alone now, and gets its solo bits.
				v3 := verifyRows(want[3].ids[0], prompts[3])
				solo := m.NewSession()
				require.NoError(t, solo.Prefill(bg, prompts[3]))
				want3, err := solo.PrefillAll(bg, v3)
				require.NoError(t, err)
				got3, err := ss[3].PrefillAll(bg, v3)
				require.NoError(t, err)
				for k := range got3 {
					testkit.RequireSameBits(t, fmt.Sprintf("session 3 row %d", k), got3[k], want3[k])
				}
			})
		}
	})
}
