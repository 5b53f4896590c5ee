package k3_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/k3-project/k3"
	fixtures "github.com/k3-project/k3/internal/testkit"
)

// TestDeterminismThreads: logits are bit-identical for 1, 2 and 3 worker goroutines (E1). The
// default-vs-purego comparison is TestPureGoBuildDigests.
func TestDeterminismThreads(t *testing.T) {
	for _, dir := range fixtures.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := loadReference(t, dir)
			var digests []uint64
			for _, n := range []int{1, 2, 3} {
				m := openModel(t, dir, k3.WithThreads(n))
				rows, err := m.Forward(context.Background(), ref.FullIDs)
				if err != nil {
					t.Fatal(err)
				}
				digests = append(digests, digest(rows))
			}
			if digests[0] != digests[1] || digests[0] != digests[2] {
				t.Errorf("digests differ across thread counts 1, 2, 3: %016x", digests)
			}
			t.Logf("DIGEST %s teacher-forced logits fnv1a64=%016x (threads 1, 2, 3 agree)", filepath.Base(dir), digests[0])
		})
	}
}

// TestChunkedPrefill: one Prefill over all positions ≡ any split into consecutive chunks, for the
// logits of every position (E1, SPEC §4.10), through PrefillAll and through Prefill.
func TestChunkedPrefill(t *testing.T) {
	ctx := context.Background()
	for _, dir := range fixtures.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := loadReference(t, dir)
			m := openModel(t, dir)
			whole, err := m.Forward(ctx, ref.FullIDs)
			if err != nil {
				t.Fatal(err)
			}
			for _, split := range [][]int{{1}, {5, 1, 7}, {3, 3, 3, 3}, {len(ref.FullIDs) - 1}} {
				s := m.NewSession()
				var rows [][]float32
				rest := ref.FullIDs
				for _, n := range split {
					if n > len(rest) {
						break
					}
					r, err := s.PrefillAll(ctx, rest[:n])
					if err != nil {
						t.Fatal(err)
					}
					rows, rest = append(rows, r...), rest[n:]
				}
				for len(rest) > 0 { // the remainder one position at a time
					if err := s.Step(ctx, rest[0]); err != nil {
						t.Fatal(err)
					}
					rows, rest = append(rows, s.Logits()), rest[1:]
				}
				if s.Len() != len(ref.FullIDs) {
					t.Fatalf("session length %d, want %d", s.Len(), len(ref.FullIDs))
				}
				for p := range whole {
					if !sameBits(whole[p], rows[p]) {
						t.Fatalf("split %v: position %d differs from the unchunked forward", split, p)
					}
				}
				lastRows(t, m, ref.FullIDs, split, whole)
			}
		})
	}
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
		if err := s.Prefill(ctx, rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest, pos = rest[n:], pos+n
		if !sameBits(whole[pos-1], s.Logits()) {
			t.Fatalf("split %v through Prefill: logits at position %d differ from the unchunked forward", split, pos-1)
		}
	}
	for ; len(rest) > 0; rest, pos = rest[1:], pos+1 {
		if err := s.Step(ctx, rest[0]); err != nil {
			t.Fatal(err)
		}
		if !sameBits(whole[pos], s.Logits()) {
			t.Fatalf("split %v through Prefill: step at position %d differs from the unchunked forward", split, pos)
		}
	}
}

// TestSnapshotRestore: restoring a snapshot (or continuing a clone) reproduces the continuation
// bit for bit, and a snapshot can be restored repeatedly.
func TestSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	for _, dir := range fixtures.Models(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ref := loadReference(t, dir)
			m := openModel(t, dir)
			s := m.NewSession()
			if err := s.Prefill(ctx, ref.PromptIDs); err != nil {
				t.Fatal(err)
			}
			snap, err := s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			clone, err := s.Clone()
			if err != nil {
				t.Fatal(err)
			}
			cont := ref.FullIDs[len(ref.PromptIDs):]
			run := func(s *k3.Session) [][]float32 {
				var out [][]float32
				for _, id := range cont[:6] {
					if err := s.Step(ctx, id); err != nil {
						t.Fatal(err)
					}
					out = append(out, s.Logits())
				}
				return out
			}
			first := run(s)
			for round := 0; round < 2; round++ {
				if err := s.Restore(snap); err != nil {
					t.Fatal(err)
				}
				if s.Len() != len(ref.PromptIDs) {
					t.Fatalf("restored length %d", s.Len())
				}
				again := run(s)
				for i := range first {
					if !sameBits(first[i], again[i]) {
						t.Fatalf("round %d step %d: restored continuation differs", round, i)
					}
				}
			}
			fromClone := run(clone)
			for i := range first {
				if !sameBits(first[i], fromClone[i]) {
					t.Fatalf("step %d: clone continuation differs", i)
				}
			}
			other := openModel(t, dir)
			if err := other.NewSession().Restore(snap); !errors.Is(err, k3.ErrForeignSnapshot) {
				t.Errorf("restore into another model's session: %v, want ErrForeignSnapshot", err)
			}
		})
	}
}

// TestMLACacheBytes: the latent cache grows by exactly Info().MLACacheBytesPerPosition per
// position.
func TestMLACacheBytes(t *testing.T) {
	dir := fixtures.Models(t)[0]
	ref := loadReference(t, dir)
	m := openModel(t, dir)
	c := m.Config()
	per := m.Info().MLACacheBytesPerPosition
	nMLA := len(c.FullAttn)
	if want := int64(nMLA * (c.KVLoRA + c.QKRope) * 4); per != want {
		t.Errorf("MLACacheBytesPerPosition %d, want %d", per, want)
	}
	s := m.NewSession()
	if err := s.Prefill(context.Background(), ref.PromptIDs); err != nil {
		t.Fatal(err)
	}
	if got := s.MLACacheBytes(); got != int64(len(ref.PromptIDs))*per {
		t.Errorf("after %d positions the caches hold %d bytes, want %d", len(ref.PromptIDs), got, int64(len(ref.PromptIDs))*per)
	}
}

// TestTokenErrors: ids outside [0, V) are typed errors and leave the session usable.
func TestTokenErrors(t *testing.T) {
	ctx := context.Background()
	dir := fixtures.Models(t)[0]
	m := openModel(t, dir)
	V := m.Config().Vocab
	s := m.NewSession()
	for _, ids := range [][]int{{1, -1}, {V}, {0, 1, V + 7}} {
		var te *k3.TokenError
		if err := s.Prefill(ctx, ids); !errors.As(err, &te) {
			t.Errorf("Prefill(%v): %v, want *TokenError", ids, err)
		} else if te.ID != ids[te.Pos] || te.Vocab != V {
			t.Errorf("Prefill(%v): %+v", ids, te)
		}
	}
	if err := s.Prefill(ctx, nil); !errors.Is(err, k3.ErrEmptyInput) {
		t.Errorf("Prefill(nil): %v", err)
	}
	if _, err := s.Next(); !errors.Is(err, k3.ErrNoLogits) {
		t.Errorf("Next before any position: %v", err)
	}
	if err := s.Prefill(ctx, []int{1, 2}); err != nil || s.Len() != 2 {
		t.Fatalf("session unusable after rejected input: %v (len %d)", err, s.Len())
	}
}

// TestCancel: a cancelled context stops generation with context.Canceled; a cancel seen before a
// call leaves the session intact.
func TestCancel(t *testing.T) {
	dir := fixtures.Models(t)[0]
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
	if n != 2 || !errors.Is(gotErr, context.Canceled) {
		t.Errorf("after cancel: %d tokens, error %v; want 2 and context.Canceled", n, gotErr)
	}
	s := m.NewSession()
	if err := s.Prefill(ctx, []int{1}); !errors.Is(err, context.Canceled) {
		t.Errorf("Prefill with cancelled ctx: %v", err)
	}
	if err := s.Prefill(context.Background(), []int{1}); err != nil {
		t.Errorf("session unusable after a cancel before the call: %v", err)
	}
}

// TestGenerateStop: generation ends right after a stop id, which is yielded; MaxTokens 0 yields
// nothing; Session.Generate continues from a prefilled session.
func TestGenerateStop(t *testing.T) {
	ctx := context.Background()
	dir := fixtures.Models(t)[0]
	ref := loadReference(t, dir)
	m := openModel(t, dir)
	cont := ref.FullIDs[len(ref.PromptIDs):]
	stop := cont[3]
	first := 0 // the stop id may occur earlier in the continuation
	for cont[first] != stop {
		first++
	}
	var got []int
	for id, err := range m.Generate(ctx, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 10, Stop: []int{stop}}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if len(got) != first+1 || got[len(got)-1] != stop {
		t.Errorf("stop id %d: got %v, want %v", stop, got, cont[:first+1])
	}
	for range m.Generate(ctx, ref.PromptIDs, k3.GenerateOptions{MaxTokens: 0}) {
		t.Error("MaxTokens 0 yielded a token")
	}
	s := m.NewSession()
	if err := s.Prefill(ctx, ref.PromptIDs); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for id, err := range s.Generate(ctx, 5, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if len(got) != 5 || countEq(got, cont) != 5 || s.Len() != len(ref.PromptIDs)+4 {
		t.Errorf("Session.Generate: %v (len %d), want %v", got, s.Len(), cont[:5])
	}
}

// TestClosed: a closed model refuses work with ErrClosed.
func TestClosed(t *testing.T) {
	dir := fixtures.Models(t)[0]
	m, err := k3.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := m.NewSession()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Prefill(context.Background(), []int{1}); !errors.Is(err, k3.ErrClosed) {
		t.Errorf("Prefill after Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestPrefillLong: a prompt longer than MaxChunk (run internally in chunks, skipping the head on
// inner chunks) gives the same last logits as one unchunked pass.
func TestPrefillLong(t *testing.T) {
	ctx := context.Background()
	m := openModel(t, fixtures.Models(t)[0])
	V := m.Config().Vocab
	ids := make([]int, k3.MaxChunk+3)
	for i := range ids {
		ids[i] = (i*37 + 11) % V
	}
	all, err := m.Forward(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	s := m.NewSession()
	if err := s.Prefill(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(ids) || !sameBits(s.Logits(), all[len(ids)-1]) {
		t.Errorf("chunked Prefill of %d ids: len %d, last logits equal %v", len(ids), s.Len(), sameBits(s.Logits(), all[len(ids)-1]))
	}
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
	m := openModel(t, fixtures.Models(t)[0])
	bg := context.Background()
	s := m.NewSession()
	if err := s.Prefill(bg, []int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := s.Clone()
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Step(bg, 4); err != nil {
		t.Fatal(err)
	}
	err = s.Step(&cancelAfter{Context: bg, n: 3}, 4) // the check before the pass, then layers 0 and 1 run
	var fe *k3.ForwardError
	if !errors.As(err, &fe) || fe.Layer != 2 || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled step: %v, want a *ForwardError at layer 2 wrapping context.Canceled", err)
	}
	if err := s.Step(bg, 4); !errors.Is(err, k3.ErrBroken) {
		t.Errorf("step on a broken session: %v, want ErrBroken", err)
	}
	if _, err := s.Snapshot(); !errors.Is(err, k3.ErrBroken) {
		t.Errorf("snapshot of a broken session: %v", err)
	}
	if err := s.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if err := s.Step(bg, 4); err != nil || !sameBits(s.Logits(), ref.Logits()) {
		t.Errorf("after Restore: %v, logits equal %v", err, sameBits(s.Logits(), ref.Logits()))
	}
	s.Reset()
	if err := s.Prefill(bg, []int{1, 2, 3, 4}); err != nil || !sameBits(s.Logits(), ref.Logits()) {
		t.Errorf("after Reset: %v", err)
	}
}

// TestConcurrentSessions: sessions of one model run concurrently with identical results.
func TestConcurrentSessions(t *testing.T) {
	m := openModel(t, fixtures.Models(t)[0], k3.WithThreads(2))
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
				if !sameBits(s.Logits(), wantLogits[i]) {
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
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
