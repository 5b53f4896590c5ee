package parallel

import (
	"fmt"
	"sync/atomic"
	"testing"
)

type span struct{ lo, hi int }

// record runs For and returns the chunks it produced, sorted by lo, and
// checks they tile [0, n) exactly once.
func record(t *testing.T, n, workers, grain int) []span {
	t.Helper()
	got := spans(t, max(n, 0), func(fn func(lo, hi int)) { For(n, workers, grain, fn) })
	for i, s := range got {
		if s.lo >= s.hi {
			t.Fatalf("For(%d,%d,%d): empty chunk %v", n, workers, grain, s)
		}
		if i > 0 && got[i-1].hi != s.lo {
			t.Fatalf("For(%d,%d,%d): chunks %v and %v not contiguous", n, workers, grain, got[i-1], s)
		}
	}
	return got
}

func TestForTilesRange(t *testing.T) {
	for n := 0; n <= 70; n++ {
		for workers := -1; workers <= 9; workers++ {
			for _, grain := range []int{-3, 0, 1, 2, 5, 16, 100} {
				got := record(t, n, workers, grain)
				g := max(grain, 1)
				wantChunks := 0
				if n > 0 {
					wantChunks = max(1, min(workers, n/g))
				}
				if len(got) != wantChunks || Chunks(n, workers, grain) != wantChunks {
					t.Fatalf("For(%d,%d,%d): %d chunks (Chunks says %d), want %d",
						n, workers, grain, len(got), Chunks(n, workers, grain), wantChunks)
				}
				for _, s := range got {
					if len(got) > 1 && s.hi-s.lo < g {
						t.Fatalf("For(%d,%d,%d): chunk %v smaller than grain", n, workers, grain, s)
					}
				}
				if len(got) > 1 {
					minSz, maxSz := n, 0
					for _, s := range got {
						minSz, maxSz = min(minSz, s.hi-s.lo), max(maxSz, s.hi-s.lo)
					}
					if maxSz-minSz > 1 {
						t.Fatalf("For(%d,%d,%d): unbalanced chunks %v", n, workers, grain, got)
					}
				}
			}
		}
	}
}

// TestForDeterministic: the same arguments give the same chunks every time.
func TestForDeterministic(t *testing.T) {
	for _, c := range [][3]int{{12288, 2, 64}, {7168, 8, 1}, {1000, 3, 7}, {5, 4, 1}} {
		first := record(t, c[0], c[1], c[2])
		for range 20 {
			again := record(t, c[0], c[1], c[2])
			if fmt.Sprint(again) != fmt.Sprint(first) {
				t.Fatalf("For%v: chunks %v then %v", c, first, again)
			}
		}
	}
}

func TestForInlineOnCaller(t *testing.T) {
	// One chunk must run before For returns, on the calling goroutine:
	// observable as fn having run with no synchronisation needed.
	ran := false
	For(10, 1, 1, func(lo, hi int) { ran = lo == 0 && hi == 10 })
	if !ran {
		t.Fatal("workers=1: fn(0, n) did not run inline")
	}
	ran = false
	For(10, 8, 6, func(lo, hi int) { ran = lo == 0 && hi == 10 })
	if !ran {
		t.Fatal("n < 2·grain: fn(0, n) did not run inline")
	}
}

func TestBounds(t *testing.T) {
	lo, hi := Bounds(10, 3, 0)
	if lo != 0 || hi != 3 {
		t.Fatalf("Bounds(10,3,0) = %d,%d", lo, hi)
	}
	lo, hi = Bounds(10, 3, 2)
	if lo != 6 || hi != 10 {
		t.Fatalf("Bounds(10,3,2) = %d,%d", lo, hi)
	}
}

// BenchmarkForOverhead measures the fixed cost of a call with trivial work.
func BenchmarkForOverhead(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers%d", workers), func(b *testing.B) {
			var sink atomic.Int64
			for b.Loop() {
				For(1024, workers, 1, func(lo, hi int) { sink.Add(int64(hi - lo)) })
			}
		})
	}
}

func TestGrain(t *testing.T) {
	for _, unit := range []int{-1, 0, 1, 3, 128, MinWork - 1, MinWork, MinWork + 1, 1 << 40} {
		g := Grain(unit)
		if g < 1 {
			t.Fatalf("Grain(%d) = %d < 1", unit, g)
		}
		if unit <= 0 {
			continue
		}
		if g*unit < MinWork {
			t.Errorf("Grain(%d) = %d items hold only %d operations", unit, g, g*unit)
		}
		if g > 1 && (g-1)*unit >= MinWork {
			t.Errorf("Grain(%d) = %d is not the fewest items holding MinWork", unit, g)
		}
	}
}
