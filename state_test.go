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
	forEachModel(t, func(t *testing.T, dir string) {
		ref := testkit.LoadReference(t, dir)
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
