package cache_test

import (
	"os"
	"testing"

	"github.com/k3-project/k3/cache"
	"github.com/k3-project/k3/internal/race"
	"github.com/k3-project/k3/moe"
	"github.com/stretchr/testify/require"
)

var benchIDs = []int{3, 11, 17, 22}

// GetMany reading every expert (budget 0, buffered) against a plain pread
// loop over the same bytes: the store's overhead per cold batch.
func BenchmarkGetManyCold(b *testing.B) {
	ck := openFixture(b)
	for _, mode := range []struct {
		name string
		opts []cache.Option
	}{
		{"buffered", []cache.Option{cache.WithoutDirectIO()}},
		{"buffered-1reader", []cache.Option{cache.WithoutDirectIO(), cache.WithReadWorkers(1)}},
		{"direct", nil},
	} {
		b.Run(mode.name, func(b *testing.B) {
			s := fixtureStore(b, ck, 4, 0, mode.opts...)
			var dst []moe.Expert
			b.SetBytes(int64(len(benchIDs)) * fixExpertBytes)
			for b.Loop() {
				out, release, err := s.Experts(0, benchIDs, dst)
				if err != nil {
					b.Fatal(err)
				}
				release()
				dst = out
			}
		})
	}
}

// The same bytes with os.File.ReadAt, one read per expert.
func BenchmarkPlainReadLoop(b *testing.B) {
	ck := openFixture(b)
	f, err := os.Open(ck.Shards()[0])
	require.NoError(b, err)
	defer f.Close()
	var offs []int64
	for _, e := range benchIDs {
		t, err := ck.Require("language_model.model.layers.0.block_sparse_moe.experts." + itoa(e) + ".w1.weight_packed")
		require.NoError(b, err)
		offs = append(offs, t.Offset)
	}
	buf := make([]byte, fixExpertBytes)
	b.SetBytes(int64(len(benchIDs)) * fixExpertBytes)
	for b.Loop() {
		for _, off := range offs {
			if _, err := f.ReadAt(buf, off); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// All resident: the hit path.
func BenchmarkGetManyHit(b *testing.B) {
	s := fixtureStore(b, openFixture(b), 4, 8)
	var dst []moe.Expert
	for b.Loop() {
		out, release, err := s.Experts(0, benchIDs, dst)
		if err != nil {
			b.Fatal(err)
		}
		release()
		dst = out
	}
}

// A batch of resident experts allocates nothing (decode steady state).
func TestHitPathAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	s := fixtureStore(t, openFixture(t), 4, 8)
	dst := make([]moe.Expert, 0, 4)
	call := func() {
		out, release, err := s.Experts(0, benchIDs, dst)
		if err != nil {
			t.Fatal(err)
		}
		release()
		dst = out
	}
	call()
	if n := testing.AllocsPerRun(50, call); n != 0 {
		t.Fatalf("resident batch: %v allocations", n)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}
