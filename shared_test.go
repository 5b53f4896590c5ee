package k3_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/internal/testkit/faultfs"
	"github.com/k3-project/k3/storage"
	"github.com/k3-project/k3/trunk"
)

// sharedPrompts returns n prompts of different lengths (2, 3, …) and contents for a model of
// vocabulary v, so that the sessions of a walk sit at different positions.
func sharedPrompts(n, v int) [][]int {
	ps := make([][]int, n)
	for i := range ps {
		for j := range 2 + i {
			ps[i] = append(ps[i], (j*31+i*17+5)%v)
		}
	}
	return ps
}

// trace is what a session produced: the id it fed at each step and the logits after it.
type trace struct {
	ids    []int
	logits [][]float32
}

// soloTraces runs each prompt alone, one session at a time: prefill, then steps greedy steps
// (each feeding the previous pick).
func soloTraces(t *testing.T, m *k3.Model, prompts [][]int, steps int) []trace {
	t.Helper()
	ctx := context.Background()
	out := make([]trace, len(prompts))
	for i, p := range prompts {
		s := m.NewSession()
		require.NoError(t, s.Prefill(ctx, p))
		for range steps {
			id, err := s.Next()
			require.NoError(t, err)
			require.NoError(t, s.Step(ctx, id))
			out[i].ids = append(out[i].ids, id)
			out[i].logits = append(out[i].logits, s.Logits())
		}
	}
	return out
}

// requireTraces checks every session's ids and logits bits against its solo run.
func requireTraces(t *testing.T, got, want []trace) {
	t.Helper()
	for i := range want {
		require.Equal(t, want[i].ids, got[i].ids, "session %d: ids", i)
		require.Len(t, got[i].logits, len(want[i].logits), "session %d: steps", i)
		for k := range want[i].logits {
			testkit.RequireSameBits(t, fmt.Sprintf("session %d step %d logits", i, k), got[i].logits[k], want[i].logits[k])
		}
	}
}

// greedyStep feeds s its own next pick, as a decode loop does, and returns the id it fed.
func greedyStep(ctx context.Context, s *k3.Session) (int, error) {
	id, err := s.Next()
	if err != nil {
		return 0, err
	}
	return id, s.Step(ctx, id)
}

// requireSoloStep steps s once with its own pick and requires the id and the logits bits of
// want's first step: what a session that got out of a walk's trouble does next, alone.
func requireSoloStep(t *testing.T, what string, s *k3.Session, want trace) {
	t.Helper()
	id, err := greedyStep(context.Background(), s)
	require.NoError(t, err, what)
	require.Equal(t, want.ids[0], id, what)
	testkit.RequireSameBits(t, what, s.Logits(), want.logits[0])
}

// prefilledSessions returns a new session of m for each prompt, prefilled with it.
func prefilledSessions(t testing.TB, m *k3.Model, prompts [][]int) []*k3.Session {
	t.Helper()
	ss := make([]*k3.Session, len(prompts))
	for i, p := range prompts {
		ss[i] = m.NewSession()
		require.NoError(t, ss[i].Prefill(context.Background(), p))
	}
	return ss
}

// heldWalk runs run(i) for every i < n, each from its own goroutine, with m's walks held until
// all n have queued: they ride one walk. It returns each call's error.
func heldWalk(m *k3.Model, n int, run func(i int) error) []error {
	release := k3.HoldWalks(m)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = run(i) })
	}
	release(n)
	wg.Wait()
	return errs
}

// cancelledWalk is heldWalk with the contexts of the cancellation tests: session inWalk's is
// cancelled after three checks, inside the walk (between layers); the last session's once all
// n have queued, so that it leaves the queue before the walk; the others' never. The walk then
// holds the n−1 that stayed.
func cancelledWalk(m *k3.Model, n, inWalk int, run func(i int, ctx context.Context) error) []error {
	bg := context.Background()
	queued, cancelQueued := context.WithCancel(bg)
	defer cancelQueued()
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = bg
	}
	ctxs[inWalk] = &cancelAfter{Context: bg, n: 3}
	ctxs[n-1] = queued
	release := k3.HoldWalks(m)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = run(i, ctxs[i]) })
	}
	for k3.QueuedSteps(m) != n {
		time.Sleep(50 * time.Microsecond)
	}
	cancelQueued()
	release(n - 1)
	wg.Wait()
	return errs
}

// requireCancels checks what cancelledWalk's cancels did to sessions ss, prefilled with
// prompts: session inWalk failed at the layer the cancel was seen (a *ForwardError wrapping
// context.Canceled) and is broken; the last one, cancelled while queued, left with its state.
func requireCancels(t *testing.T, ss []*k3.Session, errs []error, prompts [][]int, inWalk int) {
	t.Helper()
	fe, ok := errors.AsType[*k3.ForwardError](errs[inWalk])
	require.True(t, ok, "cancelled in the walk: %v, want a *ForwardError", errs[inWalk])
	assert.Equal(t, 2, fe.Layer, "the layer the cancel was seen at")
	assert.ErrorIs(t, errs[inWalk], context.Canceled)
	assert.ErrorIs(t, ss[inWalk].Step(context.Background(), 1), k3.ErrBroken, "the session cancelled in the walk is broken")
	last := len(ss) - 1
	assert.Equal(t, context.Canceled, errs[last], "cancelled while queued")
	assert.Equal(t, len(prompts[last]), ss[last].Len(), "the session that left the queue kept its state")
}

type sharedConfig struct {
	name string
	opts []k3.Option
}

// sharedConfigs are the storage configurations the shared-walk tests run: mapped, the trunk at
// its floor (pieces smaller than a tensor), and the expert cache holding nothing; with all,
// also the floor with cache 0, a trunk half pinned, the cache at half the experts, and router
// lookahead.
func sharedConfigs(t *testing.T, dir string, all bool) []sharedConfig {
	fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
	floor := []k3.Option{k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot)}
	cs := []sharedConfig{
		{"mapped", nil},
		{"floor", floor},
		{"cache0", []k3.Option{k3.WithCacheBudget(0)}},
	}
	if all {
		half := cacheBudgets(t, dir)["half"]
		cs = append(cs,
			sharedConfig{"floor+cache0", append(floor, k3.WithCacheBudget(0))},
			sharedConfig{"mixed", []k3.Option{k3.WithTrunkBudget((fl.Total + fl.EmbedBytes) / 2)}},
			sharedConfig{"cache-half", []k3.Option{k3.WithCacheBudget(half)}},
			sharedConfig{"lookahead", []k3.Option{k3.WithCacheBudget(half), k3.WithExpertPrefetch(2)}})
	}
	return cs
}

// TestSharedWalksAsAlone is the shared-walk acceptance on every fixture model: sessions with
// different prompts and lengths stepping from goroutines are gathered into walks of 2 to 8
// steps (held so that each round is exactly one walk, with sessions joining and leaving between
// rounds), and every session's ids and logits are bit-identical to its solo run — mapped, at
// the trunk floor, with an empty expert cache, both, a half-pinned trunk, a cache of half the
// experts and router lookahead, on 1 and 2 threads.
func TestSharedWalksAsAlone(t *testing.T) {
	const sessions, steps = 8, 4
	forEachModel(t, func(t *testing.T, dir string, _ *testkit.Reference) {
		for _, c := range sharedConfigs(t, dir, true) {
			for _, threads := range sweepThreads() {
				t.Run(fmt.Sprintf("%s/threads=%d", c.name, threads), func(t *testing.T) {
					m := openModel(t, dir, append(c.opts, k3.WithThreads(threads))...)
					prompts := sharedPrompts(sessions, m.Config().Vocab)
					want := soloTraces(t, m, prompts, steps)

					ctx := context.Background()
					ss := prefilledSessions(t, m, prompts)
					before := m.Stats()
					got := make([]trace, sessions)
					walks, rows := 0, 0
					for round := 0; ; round++ {
						// Session i sits out every round where (i + round) % 4 == 3 until it has
						// fallen two steps behind, and leaves when done: walks of 2 to 8 rows.
						var in []int
						for i := range ss {
							if k := len(got[i].ids); k < steps && ((i+round)%4 != 3 || k < round-1) {
								in = append(in, i)
							}
						}
						if len(in) == 0 {
							break
						}
						errs := heldWalk(m, len(in), func(k int) error {
							i := in[k]
							id, err := greedyStep(ctx, ss[i])
							if err == nil {
								got[i].ids = append(got[i].ids, id)
								got[i].logits = append(got[i].logits, ss[i].Logits())
							}
							return err
						})
						for k, err := range errs {
							require.NoError(t, err, "round %d session %d", round, in[k])
						}
						walks++
						rows += len(in)
					}
					requireTraces(t, got, want)
					st := m.Stats()
					assert.Equal(t, int64(walks), st.Walks-before.Walks, "walks: one per round")
					assert.Equal(t, int64(rows), st.WalkRows-before.WalkRows, "rows: one per step")
					assert.Greater(t, rows, 2*walks, "the rounds shared their walks")
				})
			}
		}
	})
}

// TestSharedWalksFreeRunning: sessions prefilling and stepping from goroutines without any
// holding — the gathering is whatever the timing makes it — still get their solo bits, and
// the counters account for every row.
func TestSharedWalksFreeRunning(t *testing.T) {
	const sessions, steps = 5, 6
	dir := testkit.Models(t)[0]
	for _, c := range sharedConfigs(t, dir, false) {
		t.Run(c.name, func(t *testing.T) {
			m := openModel(t, dir, append(c.opts, k3.WithThreads(2))...)
			prompts := sharedPrompts(sessions, m.Config().Vocab)
			want := soloTraces(t, m, prompts, steps)
			before := m.Stats()
			got := make([]trace, sessions)
			var wg sync.WaitGroup
			errs := make([]error, sessions)
			for i, p := range prompts {
				wg.Go(func() {
					ctx := context.Background()
					s := m.NewSession()
					if errs[i] = s.Prefill(ctx, p); errs[i] != nil {
						return
					}
					for range steps {
						id, err := greedyStep(ctx, s)
						if err != nil {
							errs[i] = err
							return
						}
						got[i].ids = append(got[i].ids, id)
						got[i].logits = append(got[i].logits, s.Logits())
					}
				})
			}
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "session %d", i)
			}
			requireTraces(t, got, want)
			st := m.Stats()
			rows := sessions * steps
			for _, p := range prompts {
				rows += len(p)
			}
			assert.Equal(t, int64(rows), st.WalkRows-before.WalkRows, "every prompt position and step is one row of a walk")
			assert.LessOrEqual(t, st.Walks-before.Walks, int64(sessions*steps))
		})
	}
}

// TestSharedWalkCancel: in one walk of four sessions, one session's context is cancelled
// between layers (it fails at that layer, broken, as alone) and another's while it waits in
// the queue (it leaves untouched); the other two get their solo bits, and the one that left
// continues with its solo bits afterwards. A step with a bad id is refused without joining.
func TestSharedWalkCancel(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, _ *testkit.Reference) {
		for _, c := range sharedConfigs(t, dir, false) {
			t.Run(c.name, func(t *testing.T) {
				m := openModel(t, dir, c.opts...)
				prompts := sharedPrompts(4, m.Config().Vocab)
				want := soloTraces(t, m, prompts, 2)
				bg := context.Background()
				ss := prefilledSessions(t, m, prompts)
				var tokErr *k3.TokenError
				require.ErrorAs(t, ss[0].Step(bg, m.Config().Vocab), &tokErr, "bad id")

				errs := cancelledWalk(m, 4, 1, func(i int, ctx context.Context) error {
					_, err := greedyStep(ctx, ss[i])
					return err
				})

				require.NoError(t, errs[0])
				require.NoError(t, errs[2])
				requireCancels(t, ss, errs, prompts, 1)

				for _, i := range []int{0, 2} {
					testkit.RequireSameBits(t, fmt.Sprintf("session %d", i), ss[i].Logits(), want[i].logits[0])
				}
				// The session that left steps again, alone now, and gets its solo bits.
				requireSoloStep(t, "session 3 after leaving", ss[3], want[3])
			})
		}
	})
}

// TestSharedWalkReadFault: a read that fails in a walk of three sessions (an EIO under one
// layer's streamed attention weights, injected through the storage seam) fails exactly those
// three, each with a *ForwardError naming the layer and a *trunk.ReadError naming the tensor (the same for all),
// and none keeps a token; a session outside that walk, stepping once the storage is healthy
// again, gets its solo bits.
func TestSharedWalkReadFault(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, _ *testkit.Reference) {
		victim := firstTensor(t, dir, func(name string) bool {
			return strings.HasSuffix(name, "layers.1.self_attn.o_proj.weight")
		})
		ffs := faultfs.New()
		open := func(path string) (storage.File, error) {
			f, err := ffs.Open(path)
			if err != nil {
				return nil, err
			}
			return f, nil
		}
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
		m := openModel(t, dir, k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot), k3.WithOpener(open))
		prompts := sharedPrompts(4, m.Config().Vocab)
		want := soloTraces(t, m, prompts, 1)
		bg := context.Background()
		ss := prefilledSessions(t, m, prompts)

		ffs.EIO(filepath.Base(victim.File), victim.Offset, victim.Size)
		errs := heldWalk(m, 3, func(i int) error {
			_, err := greedyStep(bg, ss[i])
			return err
		})
		for i, err := range errs {
			var fe *k3.ForwardError
			require.ErrorAs(t, err, &fe, "session %d", i)
			assert.Equal(t, 1, fe.Layer, "session %d: the layer", i)
			var re *trunk.ReadError
			require.ErrorAs(t, err, &re, "session %d", i)
			assert.ErrorIs(t, err, syscall.EIO)
			// The read that meets the bad span is of one of layer 1's tensors (a read window
			// may start in a neighbour of the victim); the error names it.
			assert.Equal(t, 1, re.Item, "session %d: the read's layer", i)
			assert.Contains(t, re.Tensor, "layers.1.", "session %d: the tensor", i)
			assert.Contains(t, err.Error(), re.Tensor, "session %d: the message names the tensor", i)
			assert.Equal(t, errs[0].Error(), err.Error(), "session %d: one failure for the walk", i)
			_, err = ss[i].Next()
			assert.ErrorIs(t, err, k3.ErrBroken, "session %d emits no token", i)
		}

		ffs.Reset()
		requireSoloStep(t, "the session outside the failed walk", ss[3], want[3])
	})
}

// TestSharedWalkPrefillRides: prefills ride in the same walk as decode steps — one walk holds
// two sessions' steps and two fresh sessions' whole prompts (rows at positions 0…n−1 beside
// rows at later positions) — and the next walk steps all four: every logit is bit-identical to
// the sessions run alone, on 1 and 2 threads, mapped and at the floor.
func TestSharedWalkPrefillRides(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, _ *testkit.Reference) {
		for _, c := range sharedConfigs(t, dir, false) {
			for _, threads := range sweepThreads() {
				t.Run(fmt.Sprintf("%s/threads=%d", c.name, threads), func(t *testing.T) {
					m := openModel(t, dir, append(c.opts, k3.WithThreads(threads))...)
					prompts := sharedPrompts(4, m.Config().Vocab)
					prompts[3] = append(prompts[3], prompts[2]...) // a longer prompt
					want := soloTraces(t, m, prompts, 2)
					bg := context.Background()
					wantPrefill := make([][]float32, 4)
					for i, p := range prompts {
						s := m.NewSession()
						require.NoError(t, s.Prefill(bg, p))
						wantPrefill[i] = s.Logits()
					}
					ss := make([]*k3.Session, 4)
					for i := range ss {
						ss[i] = m.NewSession()
					}
					for i := range 2 {
						require.NoError(t, ss[i].Prefill(bg, prompts[i]))
					}
					before := m.Stats()
					walk := func(run func(i int) error) {
						for i, err := range heldWalk(m, len(ss), run) {
							require.NoError(t, err, "session %d", i)
						}
					}
					step := func(i int) error {
						_, err := greedyStep(bg, ss[i])
						return err
					}
					walk(func(i int) error {
						if i < 2 {
							return step(i)
						}
						return ss[i].Prefill(bg, prompts[i])
					})
					for i := range 2 {
						testkit.RequireSameBits(t, fmt.Sprintf("session %d step", i), ss[i].Logits(), want[i].logits[0])
					}
					for i := 2; i < 4; i++ {
						testkit.RequireSameBits(t, fmt.Sprintf("session %d prefill", i), ss[i].Logits(), wantPrefill[i])
					}
					walk(step)
					for i := range 2 {
						testkit.RequireSameBits(t, fmt.Sprintf("session %d second step", i), ss[i].Logits(), want[i].logits[1])
					}
					for i := 2; i < 4; i++ {
						testkit.RequireSameBits(t, fmt.Sprintf("session %d first step", i), ss[i].Logits(), want[i].logits[0])
					}
					st := m.Stats()
					assert.Equal(t, int64(2), st.Walks-before.Walks, "two walks")
					assert.Equal(t, int64(2+len(prompts[2])+len(prompts[3])+4), st.WalkRows-before.WalkRows, "their rows")
				})
			}
		}
	})
}

// walkHeap returns the bytes allocated by the first shared walk of n decode steps on a fresh
// model on one thread (every buffer the walk sizes by rows is allocated then, to its size),
// less what the sessions' MLA caches grew by in it: that is session state, which the plan counts
// per position.
func walkHeap(t *testing.T, dir string, n int) uint64 {
	m := openModel(t, dir, k3.WithThreads(1))
	bg := context.Background()
	ss := make([]*k3.Session, n)
	for i, p := range sharedPrompts(n, m.Config().Vocab) {
		ss[i] = m.NewSession()
		require.NoError(t, ss[i].Prefill(bg, p))
		// A step alone first grows what the session itself keeps (its buffers), so that the
		// walk's growth is the walk's.
		require.NoError(t, ss[i].Step(bg, 1))
	}
	var caches int64
	for _, s := range ss {
		caches -= k3.MLACacheCapBytes(s)
	}
	release := k3.HoldWalks(m)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var before, after runtime.MemStats
	// One P: the kernels' scratch pools then hand a buffer back to the next call, as a worker
	// does, instead of a fresh one to a call that moved to another P.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// Two collections empty the kernels' scratch pools (and their victim caches), and none
	// runs during the walk: every scratch buffer the walk uses is allocated in it, to its size.
	runtime.GC()
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.ReadMemStats(&before)
	for i, s := range ss {
		wg.Go(func() { errs[i] = s.Step(bg, 1) })
	}
	release(n)
	wg.Wait()
	runtime.ReadMemStats(&after)
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, s := range ss {
		caches += k3.MLACacheCapBytes(s)
	}
	return after.TotalAlloc - before.TotalAlloc - uint64(caches)
}

// TestWalkRowBytes: the plan's memory per walk row bounds what a row adds to a walk. Measured on
// fresh models on one thread as the bytes allocated by first walks of 2 and 18 rows (garbage
// included: no collection runs in them; the sessions' MLA caches growing is left out, as
// session state): each row adds no more than the plan's WalkRowBytes, and the walk of 18 rows
// allocates no more than 18 of them in all; the bound is no more than twice a row's measure
// (it counts every arena growth and a widened copy per input width in two pools). The plan
// prints the walk bound with it, and its bound grows with the threads.
func TestWalkRowBytes(t *testing.T) {
	testkit.SkipAllocsUnderRace(t) // the race detector's pools drop buffers at random
	forEachModel(t, func(t *testing.T, dir string, _ *testkit.Reference) {
		p, err := k3.PlanFor(dir, k3.WithThreads(1))
		require.NoError(t, err)
		require.Equal(t, k3.MaxChunk, p.WalkRows)
		assert.Contains(t, p.String(), fmt.Sprintf("shared walks   up to %d rows", p.WalkRows))
		p2, err := k3.PlanFor(dir, k3.WithThreads(2))
		require.NoError(t, err)
		assert.Greater(t, p2.WalkRowBytes, p.WalkRowBytes, "two workers hold more scratch than one")
		small, large := walkHeap(t, dir, 2), walkHeap(t, dir, 18)
		require.Greater(t, large, small)
		perRow := float64(large-small) / 16
		t.Logf("measured %.0f B a row (%d B for 18 rows), bound %d", perRow, large, p.WalkRowBytes)
		assert.LessOrEqual(t, perRow, float64(p.WalkRowBytes), "a row adds more than the plan's bound")
		assert.LessOrEqual(t, large, uint64(18*p.WalkRowBytes), "a walk of 18 rows allocates more than 18 rows' bound")
		assert.LessOrEqual(t, float64(p.WalkRowBytes), 2*perRow, "the plan's bound is more than twice a row's need")
	})
}

// TestSharedGenerate: generations running from goroutines (Generate prefills and steps through
// the shared walks) emit the tokens and logits they emit alone, at the floor on 2 threads.
func TestSharedGenerate(t *testing.T) {
	const n, tokens = 4, 5
	forEachModel(t, func(t *testing.T, dir string, _ *testkit.Reference) {
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
		m := openModel(t, dir, k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot), k3.WithThreads(2))
		prompts := sharedPrompts(n, m.Config().Vocab)
		generate := func(p []int) (trace, error) {
			var tr trace
			o := k3.GenerateOptions{MaxTokens: tokens, OnLogits: func(_ int, l []float32) {
				tr.logits = append(tr.logits, append([]float32(nil), l...))
			}}
			for id, err := range m.Generate(context.Background(), p, o) {
				if err != nil {
					return tr, err
				}
				tr.ids = append(tr.ids, id)
			}
			return tr, nil
		}
		want := make([]trace, n)
		for i, p := range prompts {
			var err error
			want[i], err = generate(p)
			require.NoError(t, err)
		}
		before := m.Stats()
		got := make([]trace, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Go(func() { got[i], errs[i] = generate(p) })
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "generation %d", i)
		}
		requireTraces(t, got, want)
		st := m.Stats()
		t.Logf("%d walks carried %d rows", st.Walks-before.Walks, st.WalkRows-before.WalkRows)
	})
}

// TestStatsTokens: Stats.Tokens counts the tokens Generate emits (speculation included) and
// Session.Next returns, and Stats.BytesPerToken is the bytes the trunk store and the expert cache
// read over them; mapped, nothing is read through them and it is 0.
func TestStatsTokens(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		fl := floorOf(t, dir, k3.WithTrunkSlot(smallSlot))
		for _, mode := range []struct {
			name string
			opts []k3.Option
		}{{"floor", []k3.Option{k3.WithTrunkBudget(fl.Floor), k3.WithTrunkSlot(smallSlot), k3.WithCacheBudget(0)}}, {"mapped", nil}} {
			t.Run(mode.name, func(t *testing.T) {
				m := openModel(t, dir, mode.opts...)
				bg := context.Background()
				st := m.Stats()
				require.Zero(t, st.Tokens)
				require.Zero(t, st.BytesPerToken)
				want := int64(0)
				for _, spec := range []int{0, 4} {
					n := 0
					for _, err := range m.Generate(bg, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 5, Speculative: spec}) {
						require.NoError(t, err)
						n++
					}
					require.Equal(t, 5, n)
					want += int64(n)
					require.Equal(t, want, m.Stats().Tokens, "Generate emitted %d tokens (speculative %d)", n, spec)
				}
				s := m.NewSession()
				require.NoError(t, s.Prefill(bg, ref.PromptIDs))
				for range 3 {
					id, err := s.Next()
					require.NoError(t, err)
					require.NoError(t, s.Step(bg, id))
				}
				want += 3
				st = m.Stats()
				require.Equal(t, want, st.Tokens, "three tokens by Session.Next")
				if st.Trunk == nil {
					assert.Zero(t, st.BytesPerToken, "mapped: no bytes counted")
					return
				}
				read := st.Trunk.TotalBytes()
				if st.Cache != nil {
					read += st.Cache.Run.BytesRead
				}
				require.Positive(t, read)
				assert.Equal(t, float64(read)/float64(want), st.BytesPerToken)
			})
		}
	})
}

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
			for _, threads := range sweepThreads() {
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
					ss := prefilledSessions(t, m, prompts)
					before := m.Stats()
					got := make([][][]float32, 4)
					errs := heldWalk(m, len(ss), func(i int) error {
						if verify[i] != nil {
							var err error
							got[i], err = ss[i].PrefillAll(bg, verify[i])
							return err
						}
						_, err := greedyStep(bg, ss[i])
						return err
					})
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
// held until all four wait): sessions 0 and 2 speculate, 1 and 3 decode plainly. Each prompt is
// prefilled once and restored before each run, because the speculating ones are long (every
// id of the vocabulary, three times) and their prefill is not what is tested here
// (TestSharedWalkPrefillRides is); under -race it was most of this test's time.
func sharedSpeculativeGenerate(t *testing.T, m *k3.Model) {
	const n, tokens = 4, 8
	// The speculating sessions get prompts where the lookup always finds a draft (a different
	// one each), the others prompts of different lengths.
	prompts := sharedPrompts(n, m.Config().Vocab)
	for i := 0; i < n; i += 2 {
		prompts[i] = lookupPrompt(m, prompts[i][0]+i)
	}
	ss := make([]*k3.Session, n)
	snaps := make([]*k3.Snapshot, n)
	for i, p := range prompts {
		ss[i], snaps[i] = prefilled(t, m, p)
	}
	restore := func() {
		for i, s := range ss {
			require.NoError(t, s.Restore(snaps[i]))
		}
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
		for id, err := range ss[i].Generate(context.Background(), o) {
			if err != nil {
				return tr, res, err
			}
			tr.ids = append(tr.ids, id)
		}
		return tr, res, nil
	}
	restore()
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
	restore()
	got := make([]trace, n)
	res := make([]k3.GenerateResult, n)
	errs := heldWalk(m, n, func(i int) error {
		var err error
		got[i], res[i], err = generate(i)
		return err
	})
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

				ss := prefilledSessions(t, m, prompts)
				var got2 [][]float32
				errs := cancelledWalk(m, 4, 0, func(i int, ctx context.Context) error {
					if i == 1 {
						_, err := greedyStep(ctx, ss[i])
						return err
					}
					rows, err := ss[i].PrefillAll(ctx, verifyRows(want[i].ids[0], prompts[i]))
					if i == 2 {
						got2 = rows
					} else if rows != nil {
						err = errors.Join(err, fmt.Errorf("session %d: rows from a failed verification", i))
					}
					return err
				})

				requireCancels(t, ss, errs, prompts, 0)
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

// slowWalks is a Tracer that makes every layer of a walk take at least d.
type slowWalks struct{ d time.Duration }

func (slowWalks) ExpertRequest(int, int)                     {}
func (slowWalks) TrunkRead(int, int64, int64, time.Duration) {}
func (s slowWalks) LayerDone(int, time.Duration)             { time.Sleep(s.d) }

// TestSharedWalksLinger: sessions stepping in a loop come back a moment after their walk ends,
// and the next walk's leader waits for them (at most a share of a walk's time), so four such
// sessions share every walk instead of settling into groups that alternate walks. With the
// wait turned off (SetLinger(m, -1, 0)) the same run takes about twice the walks.
func TestSharedWalksLinger(t *testing.T) {
	const sessions, steps = 4, 8
	dir := testkit.Models(t)[0]
	m := openModel(t, dir, k3.WithThreads(2), k3.WithTracer(slowWalks{time.Millisecond}))
	k3.SetLinger(m, 1, time.Second) // up to a whole walk: the test must not depend on the load
	ctx := context.Background()
	ss := prefilledSessions(t, m, sharedPrompts(sessions, m.Config().Vocab))
	before := m.Stats()
	start := make(chan struct{})
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() {
			<-start
			for range steps {
				if _, err := greedyStep(ctx, s); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "session %d", i)
	}
	st := m.Stats()
	require.Equal(t, int64(sessions*steps), st.WalkRows-before.WalkRows)
	// The first round may split (the goroutines start one after another); every later walk
	// carries all four.
	assert.LessOrEqual(t, st.Walks-before.Walks, int64(steps+1), "walks for %d rows", sessions*steps)
}
