package k3_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k3-project/k3"
	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/sample"
)

// TestChunkedPrefill: one Prefill over all positions ≡ any split into consecutive chunks, for the
// logits of every position (E1, §4.10), through PrefillAll and through Prefill.
func TestChunkedPrefill(t *testing.T) {
	ctx := context.Background()
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
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
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
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
	s, snap := prefilled(t, m, []int{1, 2, 3})
	ref := m.NewSession()
	require.NoError(t, ref.Restore(snap))
	require.NoError(t, ref.Step(bg, 4))
	err := s.Step(&cancelAfter{Context: bg, n: 3}, 4) // the check before the pass, then layers 0 and 1 run
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

// refusal returns the reason and offset of err when it is a state-file refusal: a *StateError
// that matches ErrState. It returns reason 0 for any other error.
func refusal(err error) (k3.StateReason, int64) {
	se, ok := errors.AsType[*k3.StateError](err)
	if !ok || !errors.Is(err, k3.ErrState) {
		return 0, 0
	}
	return se.Reason, se.Offset
}

// reason is refusal without the offset.
func reason(err error) k3.StateReason {
	r, _ := refusal(err)
	return r
}

func saveState(t testing.TB, s *k3.Session, sm *sample.Sampler) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, s.Save(&buf, sm))
	return buf.Bytes()
}

// TestStateContinuesBitIdentically: on every fixture model, a session saved after the prompt
// and a few steps, then loaded, continues with bit-identical logits and ids to the
// uninterrupted session and to one Prefill of the whole history; the sampler resumes its stream.
func TestStateContinuesBitIdentically(t *testing.T) {
	ctx := context.Background()
	forEachModel(t, func(t *testing.T, dir string, ref *testkit.Reference) {
		m := openModel(t, dir)
		sm, err := sample.New(sample.Options{Temperature: 0.9, TopK: 30, RepeatPenalty: 1.2, Seed: 9})
		require.NoError(t, err)
		s := m.NewSession()
		require.NoError(t, s.Prefill(ctx, ref.PromptIDs))
		for range 3 {
			id, err := sm.Sample(s.Logits(), s.IDs())
			require.NoError(t, err)
			require.NoError(t, s.Step(ctx, id))
		}
		data := saveState(t, s, sm)
		ls, lsm, err := k3.LoadSession(m, bytes.NewReader(data))
		require.NoError(t, err)
		require.NotNil(t, lsm)
		assert.Equal(t, s.Len(), ls.Len())
		assert.Equal(t, s.IDs(), ls.IDs())
		assert.Equal(t, f32bits(s.Logits()), f32bits(ls.Logits()))
		assert.Equal(t, sm.Options(), lsm.Options())
		// Saving the loaded session reproduces the file byte for byte.
		assert.Equal(t, data, saveState(t, ls, lsm))

		// The next turn: a few user ids, then sampled tokens, on both sessions.
		turn := []int{ref.FullIDs[1], ref.FullIDs[2], ref.FullIDs[3]}
		require.NoError(t, s.Prefill(ctx, turn))
		require.NoError(t, ls.Prefill(ctx, turn))
		whole := m.NewSession()
		require.NoError(t, whole.Prefill(ctx, s.IDs()))
		for i := range 5 {
			a, b, w := s.Logits(), ls.Logits(), whole.Logits()
			require.Equal(t, f32bits(a), f32bits(b), "step %d: loaded session", i)
			require.Equal(t, f32bits(a), f32bits(w), "step %d: whole history at once", i)
			ia, err := sm.Sample(a, s.IDs())
			require.NoError(t, err)
			ib, err := lsm.Sample(b, ls.IDs())
			require.NoError(t, err)
			require.Equal(t, ia, ib, "step %d: sampler stream", i)
			require.NoError(t, s.Step(ctx, ia))
			require.NoError(t, ls.Step(ctx, ib))
			require.NoError(t, whole.Step(ctx, ia))
		}
	})
}

// stateSections returns the byte offsets where the sections of a K3ST v2 file of this session
// start, and the file length.
func stateSections(t *testing.T, m *k3.Model, s *k3.Session, sampler bool) []int {
	c := m.Config()
	nKDA := c.NumLayers - len(c.FullAttn)
	kper := int(m.Plan().KDAStateBytes) / nKDA / 4
	nMLA := len(c.FullAttn)
	off := []int{0, 4, 8, 56, 72, 96, 160, 176, 180}
	p := 180 + 4*s.Len()
	off = append(off, p)
	p += 4 * kper * nKDA
	off = append(off, p)
	p += 4 * s.Len() * c.KVLoRA * nMLA
	off = append(off, p)
	p += 4 * s.Len() * c.QKRope * nMLA
	off = append(off, p)
	p += 4 * c.Vocab
	if sampler {
		off = append(off, p)
		p += 13 * 8
	}
	off = append(off, p, p+4)
	return off
}

// TestStateRefusals: each corruption class is refused with its own reason, naming the byte at
// fault.
func TestStateRefusals(t *testing.T) {
	ctx := context.Background()
	models := testkit.Models(t)
	tinyDir, wideDir := filepath.Join(filepath.Dir(models[0]), "tiny"), filepath.Join(filepath.Dir(models[0]), "wide")
	ref := testkit.LoadReference(t, tinyDir)
	m := openModel(t, tinyDir)
	s := m.NewSession()
	require.NoError(t, s.Prefill(ctx, ref.PromptIDs))
	sm, err := sample.New(sample.Options{Temperature: 1, Seed: 1})
	require.NoError(t, err)
	data := saveState(t, s, sm)
	load := func(b []byte) error {
		_, _, err := k3.LoadSession(m, bytes.NewReader(b))
		return err
	}
	require.NoError(t, load(data))
	offs := stateSections(t, m, s, true)
	require.Equal(t, len(data), offs[len(offs)-1], "section arithmetic")

	t.Run("truncated at every section boundary", func(t *testing.T) {
		for _, o := range offs[:len(offs)-1] {
			for _, cut := range []int{o - 1, o, o + 1} {
				if cut < 0 || cut >= len(data) {
					continue
				}
				r, at := refusal(load(data[:cut]))
				assert.Equal(t, k3.StateTruncated, r, "cut at %d", cut)
				assert.Equal(t, int64(cut), at, "cut at %d: the offset is where the file ends", cut)
			}
		}
		assert.Equal(t, k3.StateTruncated, reason(load(nil)))
	})
	t.Run("bad magic", func(t *testing.T) {
		b := bytes.Clone(data)
		b[1] = 'x'
		assert.Equal(t, k3.StateBadMagic, reason(load(b)))
		assert.Equal(t, k3.StateBadMagic, reason(load([]byte("PK\x03"))))
	})
	t.Run("newer and older versions", func(t *testing.T) {
		for _, v := range []uint32{k3.StateVersion + 1, 1, 0, math.MaxUint32} {
			b := bytes.Clone(data)
			binary.LittleEndian.PutUint32(b[4:], v)
			r, at := refusal(load(b))
			assert.Equal(t, k3.StateBadVersion, r, "version %d", v)
			assert.Equal(t, int64(4), at, "version %d", v)
		}
	})
	t.Run("flipped byte", func(t *testing.T) {
		// Every byte after the version, one bit at a time (sampled along the file), is caught by
		// a checksum before any value is used: the header's for a flip in the header, the body's
		// otherwise.
		for i := 8; i < len(data); i += 1 + i/64 {
			b := bytes.Clone(data)
			b[i] ^= 1 << (i % 8)
			r, at := refusal(load(b))
			assert.Equal(t, k3.StateBadChecksum, r, "flip at %d", i)
			want := int64(176)
			if i >= 180 {
				want = int64(len(data) - 4)
			}
			assert.Equal(t, want, at, "flip at %d: the offset of the checksum", i)
		}
	})
	t.Run("another model", func(t *testing.T) {
		w := openModel(t, wideDir)
		_, _, err := k3.LoadSession(w, bytes.NewReader(data))
		assert.Equal(t, k3.StateOtherModel, reason(err))
		// A consistent header naming another tensor set or configuration digest.
		for _, at := range []int{96, 128} {
			b := bytes.Clone(data)
			b[at] ^= 0xff
			reseal(b)
			r, off := refusal(load(b))
			assert.Equal(t, k3.StateOtherModel, r, "digest at %d", at)
			assert.Equal(t, int64(at), off, "digest at %d", at)
		}
	})
	t.Run("cache form", func(t *testing.T) {
		b := bytes.Clone(data)
		c := m.Config()
		// The C engine's expanded form stores heads·(nope+v) floats per position.
		binary.LittleEndian.PutUint64(b[80:], uint64(c.MLAHeads*(c.QKNope+c.VHead)))
		reseal(b)
		r, at := refusal(load(b))
		assert.Equal(t, k3.StateOtherCacheForm, r)
		assert.Equal(t, int64(80), at)
	})
	t.Run("impossible values under a valid checksum", func(t *testing.T) {
		b := bytes.Clone(data)
		binary.LittleEndian.PutUint32(b[180:], uint32(c3Vocab(m))) // the first id
		resealBody(b)
		r, at := refusal(load(b))
		assert.Equal(t, k3.StateCorrupt, r)
		assert.Equal(t, int64(180), at, "the first id")
		b = bytes.Clone(data)
		binary.LittleEndian.PutUint32(b[68:], 1) // nseq != cached
		reseal(b)
		r, at = refusal(load(b))
		assert.Equal(t, k3.StateCorrupt, r)
		assert.Equal(t, int64(68), at, "nseq")
		b = bytes.Clone(data)
		binary.LittleEndian.PutUint32(b[64:], 1<<30) // more positions than any file may hold
		binary.LittleEndian.PutUint32(b[68:], 1<<30)
		reseal(b)
		r, at = refusal(load(b))
		assert.Equal(t, k3.StateCorrupt, r)
		assert.Equal(t, int64(64), at, "cached")
	})
	t.Run("messages say what and where", func(t *testing.T) {
		b := bytes.Clone(data)
		binary.LittleEndian.PutUint32(b[4:], k3.StateVersion+1)
		assert.EqualError(t, load(b), fmt.Sprintf("k3: unsupported K3ST state file version at byte 4: version %d is newer than %d",
			k3.StateVersion+1, k3.StateVersion))
		b = bytes.Clone(data)
		b[100] ^= 1
		assert.ErrorContains(t, load(b), "k3: state file checksum mismatch (corrupted) at byte 176: header CRC-32C ")
		assert.EqualError(t, load(data[:50]), "k3: state file is truncated at byte 50")
	})
	t.Run("huge claim, short file", func(t *testing.T) {
		// A header claiming the most positions allowed, with no body: refused as truncated
		// without allocating for the claim.
		b := bytes.Clone(data[:180])
		binary.LittleEndian.PutUint32(b[64:], k3.MaxStatePositions)
		binary.LittleEndian.PutUint32(b[68:], k3.MaxStatePositions)
		reseal(b)
		r, at := refusal(load(b))
		assert.Equal(t, k3.StateTruncated, r)
		assert.Equal(t, int64(180), at)
	})
}

func c3Vocab(m *k3.Model) int { return m.Config().Vocab }

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// reseal recomputes the header checksum after an edit.
func reseal(b []byte) {
	binary.LittleEndian.PutUint32(b[176:], crc32.Checksum(b[:176], castagnoliTable))
}

// resealBody recomputes the body checksum after an edit.
func resealBody(b []byte) {
	n := len(b) - 4
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[180:n], castagnoliTable))
}

// TestStateTestdataSeeds keeps the fuzz seed corpus in step with the format: the valid seed
// must load into models/tiny.
func TestStateTestdataSeeds(t *testing.T) {
	dir := filepath.Join(testkit.Path(t, "models"), "tiny")
	m := openModel(t, dir)
	ref := testkit.LoadReference(t, dir)
	if os.Getenv("K3_WRITE_STATE_SEEDS") == "1" {
		// Regenerate after a format change: K3_WRITE_STATE_SEEDS=1 go test -run TestStateTestdataSeeds
		s := m.NewSession()
		require.NoError(t, os.MkdirAll(filepath.Join("testdata", "state"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "state", "empty.k3st"), saveState(t, s, nil), 0o644))
		require.NoError(t, s.Prefill(context.Background(), ref.PromptIDs[:4]))
		sm, err := sample.New(sample.Options{Temperature: 0.7, TopP: 0.9, Seed: 3})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "state", "tiny.k3st"), saveState(t, s, sm), 0o644))
	}
	for _, name := range []string{"empty.k3st", "tiny.k3st"} {
		data, err := os.ReadFile(filepath.Join("testdata", "state", name))
		require.NoError(t, err)
		s, _, err := k3.LoadSession(m, bytes.NewReader(data))
		require.NoError(t, err, name)
		if name == "tiny.k3st" {
			assert.Equal(t, ref.PromptIDs[:4], s.IDs())
		}
	}
}

// FuzzLoadSession: no input makes the loader panic, hang or fail other than with a *StateError
// of a known reason that matches ErrState; accepted inputs re-save to the same bytes.
func FuzzLoadSession(f *testing.F) {
	dir := filepath.Join(testkit.Path(f, "models"), "tiny")
	m, err := k3.Open(dir, k3.WithThreads(1))
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	seeds, _ := filepath.Glob(filepath.Join("testdata", "state", "*.k3st"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("K3ST"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, sm, err := k3.LoadSession(m, bytes.NewReader(b))
		if err != nil {
			r := reason(err)
			require.True(t, r >= k3.StateBadMagic && r <= k3.StateTruncated, "error without a state refusal reason: %v", err)
			return
		}
		var out bytes.Buffer
		require.NoError(t, s.Save(&out, sm))
		require.True(t, out.Len() <= len(b) && bytes.Equal(out.Bytes(), b[:out.Len()]), "re-saved state differs from the accepted input")
	})
}
