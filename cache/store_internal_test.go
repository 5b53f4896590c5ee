package cache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/k3-project/k3/internal/testkit"
	"github.com/k3-project/k3/moe"
	"github.com/k3-project/k3/quant"
	"github.com/k3-project/k3/safetensors"
	"github.com/k3-project/k3/storage"
	"github.com/stretchr/testify/require"
)

// checkExpert verifies that the slot serving (layer 0, e) holds the
// fixture's bytes and that the views read those bytes.
func checkSlotBytes(t *testing.T, s *Store, e int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slotOf[s.key(0, e)]
	require.False(t, sl < 0, "expert %d not resident", e)
	l := &s.locs[s.key(0, e)]
	mem := s.arena.mem[int64(sl)*s.slotBytes : int64(sl+1)*s.slotBytes]
	_, _, pad := storage.Window(l.lo, l.n)
	if s.files[l.file].r.Mode() == storage.ModeBuffered {
		pad = 0
	}
	for part := range nparts {
		b := mem[pad+l.at[part] : pad+l.at[part]+l.size[part]]
		require.Equal(t, fixtureBytes(e, part/2, part%2 == 1, len(b)), b, "expert %d part %d", e, part)
	}
}

// checkViews compares an expert's decoded rows with views over the
// fixture's own bytes.
func checkViews(t *testing.T, ck *safetensors.Checkpoint, e int, ex moe.Expert) {
	t.Helper()
	for w, mat := range []quant.Matrix{ex.W1, ex.W2, ex.W3} {
		m := mat.(interface {
			quant.Matrix
			quant.RowDecoder
		})
		p := "language_model.model.layers.0.block_sparse_moe.experts." + strconv.Itoa(e) + ".w" + strconv.Itoa(w+1)
		pt, _ := ck.Tensor(p + ".weight_packed")
		st, _ := ck.Tensor(p + ".weight_scale")
		pb, err := ck.Bytes(pt)
		require.NoError(t, err)
		sb, err := ck.Bytes(st)
		require.NoError(t, err)
		require.Equal(t, fixtureBytes(e, w, false, len(pb)), pb, "fixture itself: expert %d w%d", e, w+1)
		require.Equal(t, fixtureBytes(e, w, true, len(sb)), sb, "fixture itself: expert %d w%d scales", e, w+1)
		got, want := make([]float32, m.Cols()), make([]float32, m.Cols())
		ref := newRef(t, m.Rows(), m.Cols(), pb, sb)
		for r := range m.Rows() {
			m.DecodeRow(got, r)
			ref.DecodeRow(want, r)
			testkit.RequireSameBitsOrNaN(t, fmt.Sprintf("expert %d w%d row %d", e, w+1, r), got, want)
		}
	}
}

// Byte-exact experts under eviction pressure (TopK + 1 ≤ slots < 24), for
// LRU and S3-FIFO, serial and batched, through reads that refuse anything
// not 4096-aligned: the odd 1,632-byte experts only work with a 4096
// multiple stride.
func TestFixtureByteExactUnderPressure(t *testing.T) {
	ck := openFixture(t)
	for _, pol := range []PolicyName{LRU, S3FIFO} {
		for _, nslots := range []int{fixTopK + 1, 7, 12, 23} {
			for _, batched := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%d/batched=%v", pol, nslots, batched), func(t *testing.T) {
					s, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: fixTopK, Budget: int64(nslots) * SlotSize(fixExpertBytes)},
						WithPolicy(pol), withStrictDirect(), WithReadWorkers(3))
					require.NoError(t, err)
					defer func() { require.NoError(t, s.Close()) }()
					require.Equal(t, int64(12288), s.SlotBytes())
					require.Zero(t, s.SlotBytes()%4096)
					require.Equal(t, nslots, s.Slots())
					r := rand.New(rand.NewPCG(uint64(nslots), 9))
					var dst []moe.Expert
					for range 150 {
						var ids []int
						if batched {
							ids = r.Perm(fixNE)[:fixTopK]
						} else {
							ids = []int{r.IntN(fixNE)}
						}
						out, release, err := s.Experts(0, ids, dst)
						require.NoError(t, err)
						for i, e := range ids {
							checkSlotBytes(t, s, e)
							checkViews(t, ck, e, out[i])
						}
						release()
						dst = out
					}
					st := s.Stats()
					require.Equal(t, "direct", st.IOMode)
					require.Greater(t, st.Run.Evictions, int64(0))
					require.Equal(t, st.Run.Requests, st.Run.Hits+st.Run.Misses)
					require.Zero(t, st.Leased)
				})
			}
		}
	}
}

// A failed or short read surfaces as *ExpertLoadError naming layer and
// expert; the slot is left EMPTY, never served, and no lease survives. The
// same expert reads fine once the storage heals.
func TestFaultInjection(t *testing.T) {
	ck := openFixture(t)
	for _, budgetSlots := range []int{0, fixTopK + 1} {
		for _, short := range []bool{false, true} {
			t.Run(fmt.Sprintf("slots=%d/short=%v", budgetSlots, short), func(t *testing.T) {
				ff := &faultFile{}
				s, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: fixTopK, Budget: int64(budgetSlots) * SlotSize(fixExpertBytes)},
					WithOpener(faultOpener(ff)))
				require.NoError(t, err)
				defer s.Close()
				bad := 7
				l := s.locs[s.key(0, bad)]
				ff.set(l.lo+100, l.lo+101, short)
				_, release, err := s.Experts(0, []int{3, bad, 11}, nil)
				require.Error(t, err)
				require.Nil(t, release)
				var le *ExpertLoadError
				require.True(t, errors.As(err, &le), "%v", err)
				require.Equal(t, 0, le.Layer)
				require.Equal(t, bad, le.Expert)
				if short {
					require.ErrorIs(t, err, safetensors.ErrShortRead)
				} else {
					require.ErrorIs(t, err, syscall.EIO)
				}
				require.Contains(t, err.Error(), "expert 7")
				st := s.Stats()
				require.Zero(t, st.Leased)
				require.Equal(t, int64(1), st.Run.Failures)
				if budgetSlots > 0 {
					s.mu.Lock()
					require.Equal(t, int32(-1), s.slotOf[s.key(0, bad)], "failed expert must not be resident")
					for i := range s.slots {
						require.NotEqual(t, stateInflight, s.slots[i].state)
					}
					s.mu.Unlock()
					require.Equal(t, 2, st.Resident) // the two good reads were published
				}
				// Still failing: still an error, never a served slot.
				_, _, err = s.Experts(0, []int{bad}, nil)
				require.ErrorAs(t, err, &le)
				ff.heal()
				out, release, err := s.Experts(0, []int{bad, 3}, nil)
				require.NoError(t, err)
				checkViews(t, ck, bad, out[0])
				if budgetSlots > 0 {
					checkSlotBytes(t, s, bad)
				}
				release()
				require.Zero(t, s.Stats().Leased)
			})
		}
	}
}

// Many goroutines requesting overlapping batches (and prefetching) always
// see the right bytes; run with -race.
func TestConcurrentExperts(t *testing.T) {
	ck := openFixture(t)
	for _, pol := range []PolicyName{LRU, S3FIFO} {
		s, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: fixTopK, Budget: 20 * SlotSize(fixExpertBytes)},
			WithPolicy(pol), WithMaxBatch(fixTopK))
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 1))
				var dst []moe.Expert
				for i := range 120 {
					if i%5 == 0 {
						s.Prefetch(0, r.Perm(fixNE)[:2])
					}
					ids := r.Perm(fixNE)[:fixTopK]
					out, release, err := s.Experts(0, ids, dst)
					if err != nil {
						errs <- err
						return
					}
					for j, e := range ids {
						if err := sameAsFixture(ck, e, out[j]); err != nil {
							errs <- err
							release()
							return
						}
					}
					release()
					dst = out
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		st := s.Stats()
		require.Equal(t, int64(4*120*fixTopK), st.Run.Requests)
		require.Equal(t, st.Run.Requests, st.Run.Hits+st.Run.Misses)
		require.Zero(t, st.Leased)
		require.NoError(t, s.Close())
	}
}

// sameAsFixture is checkViews without testing.T (for goroutines).
func sameAsFixture(ck *safetensors.Checkpoint, e int, ex moe.Expert) error {
	p := "language_model.model.layers.0.block_sparse_moe.experts." + strconv.Itoa(e) + ".w1"
	pt, _ := ck.Tensor(p + ".weight_packed")
	st, _ := ck.Tensor(p + ".weight_scale")
	pb, _ := ck.Bytes(pt)
	sb, _ := ck.Bytes(st)
	ref := newRef(nil, ex.W1.Rows(), ex.W1.Cols(), pb, sb)
	got, want := make([]float32, ex.W1.Cols()), make([]float32, ex.W1.Cols())
	for r := range ex.W1.Rows() {
		ex.W1.(quant.RowDecoder).DecodeRow(got, r)
		ref.DecodeRow(want, r)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("expert %d row %d differs", e, r)
		}
	}
	return nil
}

func TestBudgetFloor(t *testing.T) {
	ck := openFixture(t)
	slot := SlotSize(fixExpertBytes)
	_, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: fixTopK, Budget: 5*slot - 1})
	require.ErrorIs(t, err, ErrBudgetTooSmall)
	require.True(t, strings.Contains(err.Error(), strconv.FormatInt(MinBudget(slot, fixTopK), 10)), err.Error())
	s, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: fixTopK, Budget: 5 * slot})
	require.NoError(t, err)
	require.Equal(t, 5, s.Slots())
	require.Equal(t, fixTopK, s.MaxBatch())
	require.NoError(t, s.Close())

	// Budget 0: every request reads, into scratch reused between calls.
	z, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: fixTopK})
	require.NoError(t, err)
	defer z.Close()
	for range 3 {
		out, release, err := z.Experts(0, []int{1, 2, 3, 4}, nil)
		require.NoError(t, err)
		for i, e := range []int{1, 2, 3, 4} {
			checkViews(t, ck, e, out[i])
		}
		release()
	}
	_, _, err = z.Experts(0, []int{1, 2, 3, 4, 5}, nil)
	require.ErrorIs(t, err, ErrBatchTooLarge)
	st := z.Stats()
	require.Equal(t, int64(12), st.Run.Requests)
	require.Equal(t, int64(12), st.Run.Misses)
	require.Equal(t, int64(12*fixExpertBytes), st.Run.BytesRead)
	require.Zero(t, st.Run.Hits)
	require.Empty(t, z.scratch, "one call at a time needs no scratch beyond the shared one")
	require.Len(t, z.scratchFree, fixTopK, "every shared scratch slot must be back after release")
	require.Equal(t, 0, st.Slots)
}

func TestBadInput(t *testing.T) {
	ck := openFixture(t)
	_, err := New(ck, Config{Layers: []int{0}, NumExperts: 25, TopK: 4})
	require.ErrorIs(t, err, ErrExpertTensor)
	require.Contains(t, err.Error(), "experts.24.w1.weight_packed is missing")
	_, err = New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: 4, Shapes: &Shapes{W1: [2]int{8, 128}, W2: [2]int{128, 8}, W3: [2]int{8, 128}}})
	require.ErrorIs(t, err, ErrExpertTensor) // the fixture's w2 is not a down-projection
	s, err := New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: 4, Shapes: &Shapes{W1: [2]int{8, 128}, W2: [2]int{8, 128}, W3: [2]int{8, 128}}})
	require.NoError(t, err)
	defer s.Close()
	var le *ExpertLoadError
	_, _, err = s.Experts(1, []int{0}, nil)
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, ErrUnknownLayer)
	_, _, err = s.Experts(0, []int{24}, nil)
	require.ErrorIs(t, err, ErrExpertID)
	require.ErrorAs(t, err, &le)
	require.Equal(t, 24, le.Expert)
	_, err = New(ck, Config{Layers: []int{0}, NumExperts: fixNE, TopK: 4}, WithPolicy("fifo"))
	require.ErrorIs(t, err, ErrUnknownPolicy)
}
