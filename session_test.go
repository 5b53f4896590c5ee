package k3_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
)

// TestDeterminismThreads: logits are bit-identical for 1, 2 and 3 worker goroutines (E1). The
// default-vs-purego comparison is TestPureGoBuildDigests.
func TestDeterminismThreads(t *testing.T) {
	forEachModel(t, func(t *testing.T, dir string) {
		ref := testkit.LoadReference(t, dir)
		var digests []uint64
		for _, n := range []int{1, 2, 3} {
			m := openModel(t, dir, k3.WithThreads(n))
			rows, err := m.Forward(context.Background(), ref.FullIDs)
			require.NoError(t, err)
			digests = append(digests, testkit.Digest(rows...))
		}
		assert.Equal(t, []uint64{digests[0], digests[0], digests[0]}, digests, "digests differ across thread counts 1, 2, 3")
		t.Logf("DIGEST %s teacher-forced logits fnv1a64=%016x (threads 1, 2, 3 agree)", filepath.Base(dir), digests[0])
	})
}

// TestChunkedPrefill: one Prefill over all positions ≡ any split into consecutive chunks, for the
// logits of every position (E1, SPEC §4.10), through PrefillAll and through Prefill.
func TestChunkedPrefill(t *testing.T) {
	ctx := context.Background()
	forEachModel(t, func(t *testing.T, dir string) {
		ref := testkit.LoadReference(t, dir)
		m := openModel(t, dir)
		whole, err := m.Forward(ctx, ref.FullIDs)
		require.NoError(t, err)
		for _, split := range [][]int{{1}, {5, 1, 7}, {3, 3, 3, 3}, {len(ref.FullIDs) - 1}} {
			s := m.NewSession()
			var rows [][]float32
			rest := ref.FullIDs
			for _, n := range split {
				if n > len(rest) {
					break
				}
				r, err := s.PrefillAll(ctx, rest[:n])
				require.NoError(t, err)
				rows, rest = append(rows, r...), rest[n:]
			}
			for len(rest) > 0 { // the remainder one position at a time
				require.NoError(t, s.Step(ctx, rest[0]))
				rows, rest = append(rows, s.Logits()), rest[1:]
			}
			require.Equal(t, len(ref.FullIDs), s.Len(), "session length")
			for p := range whole {
				require.True(t, testkit.SameBits(whole[p], rows[p]), "split %v: position %d differs from the unchunked forward", split, p)
			}
			lastRows(t, m, ref.FullIDs, split, whole)
		}
	})
}

// lastRows is TestChunkedPrefill's split through Prefill, which runs the last layer's FFN and MLA
// outputs for the last position only: it must leave that position's logits and a state from
// which every later step gives the logits of the unchunked forward, bit for bit.
func lastRows(t *testing.T, m *k3.Model, ids, split []int, whole [][]float32) {
	t.Helper()
	ctx := context.Background()
	s := m.NewSession()
	rest, pos := ids, 0
	for _, n := range split {
		if n > len(rest) {
			break
		}
		require.NoError(t, s.Prefill(ctx, rest[:n]))
		rest, pos = rest[n:], pos+n
		require.True(t, testkit.SameBits(whole[pos-1], s.Logits()),
			"split %v through Prefill: logits at position %d differ from the unchunked forward", split, pos-1)
	}
	for ; len(rest) > 0; rest, pos = rest[1:], pos+1 {
		require.NoError(t, s.Step(ctx, rest[0]))
		require.True(t, testkit.SameBits(whole[pos], s.Logits()),
			"split %v through Prefill: step at position %d differs from the unchunked forward", split, pos)
	}
}

// TestSnapshotRestore: restoring a snapshot (into its session or a new one) reproduces the continuation
// bit for bit, and a snapshot can be restored repeatedly.
func TestSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	forEachModel(t, func(t *testing.T, dir string) {
		ref := testkit.LoadReference(t, dir)
		m := openModel(t, dir)
		s := m.NewSession()
		require.NoError(t, s.Prefill(ctx, ref.PromptIDs))
		snap, err := s.Snapshot()
		require.NoError(t, err)
		clone := m.NewSession()
		require.NoError(t, clone.Restore(snap))
		cont := ref.FullIDs[len(ref.PromptIDs):]
		run := func(s *k3.Session) [][]float32 {
			var out [][]float32
			for _, id := range cont[:6] {
				require.NoError(t, s.Step(ctx, id))
				out = append(out, s.Logits())
			}
			return out
		}
		first := run(s)
		for round := 0; round < 2; round++ {
			require.NoError(t, s.Restore(snap))
			require.Equal(t, len(ref.PromptIDs), s.Len(), "restored length")
			again := run(s)
			for i := range first {
				require.True(t, testkit.SameBits(first[i], again[i]), "round %d step %d: restored continuation differs", round, i)
			}
		}
		fromClone := run(clone)
		for i := range first {
			require.True(t, testkit.SameBits(first[i], fromClone[i]), "step %d: clone continuation differs", i)
		}
		other := openModel(t, dir)
		err = other.NewSession().Restore(snap)
		assert.ErrorIs(t, err, k3.ErrState, "restore into another model's session")
		if se, ok := errors.AsType[*k3.StateError](err); assert.True(t, ok, "%v, want a *StateError", err) {
			assert.Equal(t, k3.StateOtherModel, se.Reason, "restore into another model's session")
		}
	})
}

// TestMLACacheBytes: the latent cache grows by exactly Plan().MLABytesPerPosition per
// position.
func TestMLACacheBytes(t *testing.T) {
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	c := m.Config()
	per := m.Plan().MLABytesPerPosition
	nMLA := len(c.FullAttn)
	assert.Equal(t, int64(nMLA*(c.KVLoRA+c.QKRope)*4), per, "MLABytesPerPosition")
	s := m.NewSession()
	require.NoError(t, s.Prefill(context.Background(), ref.PromptIDs))
	assert.Equal(t, int64(len(ref.PromptIDs))*per, k3.MLACacheBytes(s), "after %d positions", len(ref.PromptIDs))
}

// TestTokenErrors: ids outside [0, V) are typed errors and leave the session usable.
func TestTokenErrors(t *testing.T) {
	ctx := context.Background()
	dir := testkit.Models(t)[0]
	m := openModel(t, dir)
	V := m.Config().Vocab
	s := m.NewSession()
	for _, ids := range [][]int{{1, -1}, {V}, {0, 1, V + 7}} {
		err := s.Prefill(ctx, ids)
		te, ok := errors.AsType[*k3.TokenError](err)
		if assert.True(t, ok, "Prefill(%v): %v, want *TokenError", ids, err) {
			assert.Equal(t, ids[te.Pos], te.ID, "Prefill(%v): %+v", ids, te)
			assert.Equal(t, V, te.Vocab, "Prefill(%v): %+v", ids, te)
		}
	}
	assert.ErrorIs(t, s.Prefill(ctx, nil), k3.ErrEmptyInput, "Prefill(nil)")
	_, err := s.Next()
	assert.ErrorIs(t, err, k3.ErrNoLogits, "Next before any position")
	require.NoError(t, s.Prefill(ctx, []int{1, 2}), "session unusable after rejected input")
	require.Equal(t, 2, s.Len(), "session unusable after rejected input")
}

// TestCancel: a cancelled context stops generation with context.Canceled; a cancel seen before a
// call leaves the session intact.
func TestCancel(t *testing.T) {
	dir := testkit.Models(t)[0]
	m := openModel(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var gotErr error
	for _, err := range m.Generate(ctx, []int{1, 2, 3}, k3.GenerateOptions{MaxTokens: 10}) {
		if err != nil {
			gotErr = err
			break
		}
		n++
		if n == 2 {
			cancel()
		}
	}
	assert.Equal(t, 2, n, "tokens before the cancel took effect")
	assert.ErrorIs(t, gotErr, context.Canceled)
	s := m.NewSession()
	assert.ErrorIs(t, s.Prefill(ctx, []int{1}), context.Canceled, "Prefill with cancelled ctx")
	assert.NoError(t, s.Prefill(context.Background(), []int{1}), "session unusable after a cancel before the call")
}

// TestGenerateStop: generation ends right after a stop id, which is yielded; MaxTokens 0 yields
// nothing; Session.Generate continues from a prefilled session.
func TestGenerateStop(t *testing.T) {
	ctx := context.Background()
	dir := testkit.Models(t)[0]
	ref := testkit.LoadReference(t, dir)
	m := openModel(t, dir)
	cont := ref.FullIDs[len(ref.PromptIDs):]
	stop := cont[3]
	first := 0 // the stop id may occur earlier in the continuation
	for cont[first] != stop {
		first++
	}
	var got []int
	for id, err := range m.Generate(ctx, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 10, Stop: []int{stop}}) {
		require.NoError(t, err)
		got = append(got, id)
	}
	require.Len(t, got, first+1, "stop id %d: got %v, want %v", stop, got, cont[:first+1])
	assert.Equal(t, stop, got[len(got)-1], "the stop id is yielded last")
	for range m.Generate(ctx, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 0}) {
		assert.Fail(t, "MaxTokens 0 yielded a token")
	}
	s := m.NewSession()
	require.NoError(t, s.Prefill(ctx, ref.PromptIDs))
	got = got[:0]
	for id, err := range s.Generate(ctx, k3.GenerateOptions{MaxTokens: 5}) {
		require.NoError(t, err)
		got = append(got, id)
	}
	assert.Len(t, got, 5, "Session.Generate: %v, want %v", got, cont[:5])
	assert.Equal(t, 5, countEq(got, cont), "Session.Generate: %v, want %v", got, cont[:5])
	assert.Equal(t, len(ref.PromptIDs)+4, s.Len(), "the session holds every yielded token but the last")
}

// TestClosed: a closed model refuses work with ErrClosed.
func TestClosed(t *testing.T) {
	dir := testkit.Models(t)[0]
	m, err := k3.Open(dir)
	require.NoError(t, err)
	s := m.NewSession()
	require.NoError(t, m.Close())
	assert.ErrorIs(t, s.Prefill(context.Background(), []int{1}), k3.ErrClosed, "Prefill after Close")
	assert.NoError(t, m.Close(), "second Close")
}

// TestPrefillLong: a prompt longer than MaxChunk (run internally in chunks, skipping the head on
// inner chunks) gives the same last logits as one unchunked pass.
func TestPrefillLong(t *testing.T) {
	ctx := context.Background()
	m := openModel(t, testkit.Models(t)[0])
	V := m.Config().Vocab
	ids := make([]int, k3.MaxChunk+3)
	for i := range ids {
		ids[i] = (i*37 + 11) % V
	}
	all, err := m.Forward(ctx, ids)
	require.NoError(t, err)
	s := m.NewSession()
	require.NoError(t, s.Prefill(ctx, ids))
	assert.Equal(t, len(ids), s.Len())
	assert.True(t, testkit.SameBits(s.Logits(), all[len(ids)-1]), "chunked Prefill of %d ids: last logits differ", len(ids))
}

// cancelAfter is a context whose Err turns to Canceled after n calls: it cancels a forward pass
// between two layers, deterministically.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

// TestBrokenSession: a pass cancelled between layers leaves the session marked ErrBroken (its
// carried state is half-advanced) until Restore or Reset; both give exact continuations again.
func TestBrokenSession(t *testing.T) {
	m := openModel(t, testkit.Models(t)[0])
	bg := context.Background()
	s := m.NewSession()
	require.NoError(t, s.Prefill(bg, []int{1, 2, 3}))
	snap, err := s.Snapshot()
	require.NoError(t, err)
	ref := m.NewSession()
	require.NoError(t, ref.Restore(snap))
	require.NoError(t, ref.Step(bg, 4))
	err = s.Step(&cancelAfter{Context: bg, n: 3}, 4) // the check before the pass, then layers 0 and 1 run
	fe, ok := errors.AsType[*k3.ForwardError](err)
	require.True(t, ok, "cancelled step: %v, want a *ForwardError", err)
	require.Equal(t, 2, fe.Layer, "the layer the cancel was seen at")
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, s.Step(bg, 4), k3.ErrBroken, "step on a broken session")
	_, err = s.Snapshot()
	assert.ErrorIs(t, err, k3.ErrBroken, "snapshot of a broken session")
	require.NoError(t, s.Restore(snap))
	assert.NoError(t, s.Step(bg, 4), "after Restore")
	assert.True(t, testkit.SameBits(s.Logits(), ref.Logits()), "after Restore: logits differ")
	s.Reset()
	assert.NoError(t, s.Prefill(bg, []int{1, 2, 3, 4}), "after Reset")
	assert.True(t, testkit.SameBits(s.Logits(), ref.Logits()), "after Reset: logits differ")
}

// TestConcurrentSessions: sessions of one model run concurrently with identical results.
func TestConcurrentSessions(t *testing.T) {
	m := openModel(t, testkit.Models(t)[0], k3.WithThreads(2))
	prompt := []int{9, 8, 7}
	want, wantLogits := greedy(t, m, prompt, 6, false)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s := m.NewSession()
			if err := s.Prefill(context.Background(), prompt); err != nil {
				errs <- err
				return
			}
			for i := range want {
				if !testkit.SameBits(s.Logits(), wantLogits[i]) {
					errs <- errors.New("concurrent session diverged")
					return
				}
				if err := s.Step(context.Background(), want[i]); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		assert.NoError(t, <-errs)
	}
}
