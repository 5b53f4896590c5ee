package tokenizer

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

// naiveBPE is a direct statement of §10.5 over [][]byte parts, written
// without the package's data structures: find the lowest-ranked adjacent
// concatenation (leftmost on ties), merge, repeat.
func naiveBPE(r *Ranks, piece string) []int {
	if rk, ok := r.Rank([]byte(piece)); ok {
		return []int{rk}
	}
	ids, _ := naiveMerge(r, piece)
	return ids
}

// naiveMerge merges piece from single bytes (without naiveBPE's whole-piece
// lookup) and returns the parts' ranks and the highest rank it merged (0 if
// none).
func naiveMerge(r *Ranks, piece string) ([]int, uint32) {
	parts := make([]string, len(piece))
	for i := range parts {
		parts[i] = piece[i : i+1]
	}
	var top uint32
	for {
		best, at := -1, -1
		for i := 0; i+1 < len(parts); i++ {
			if rk, ok := r.Rank([]byte(parts[i] + parts[i+1])); ok && (best < 0 || rk < best) {
				best, at = rk, i
			}
		}
		if at < 0 {
			break
		}
		top = max(top, uint32(best))
		parts[at] += parts[at+1]
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	out := make([]int, len(parts))
	for i, p := range parts {
		out[i], _ = r.Rank([]byte(p))
	}
	return out, top
}

// TestBPEAgreement runs the array merge, the heap merge and naiveBPE on
// pieces cut from the fixture texts at random (ignoring split points, so
// pieces are long and mixed) and on tie-heavy repetitions.
func TestBPEAgreement(t *testing.T) {
	fe := fixtureByName(t, "o200k")
	r := fe.enc.Ranks()
	rng := rand.New(rand.NewSource(3))
	var corpus strings.Builder
	for _, c := range loadFixtures(t).cases {
		corpus.WriteString(c.Text)
	}
	text := corpus.String()
	pieces := []string{strings.Repeat("a", 257), strings.Repeat("ab", 150), strings.Repeat(" ", 333), strings.Repeat("中", 120), strings.Repeat("\xff", 101)}
	for n := 0; n < 300; n++ {
		l := 1 + rng.Intn(220)
		s := rng.Intn(len(text) - l)
		pieces = append(pieces, text[s:s+l])
	}
	for _, p := range pieces {
		want := naiveBPE(r, p)
		heap := r.bpeHeap(nil, p, &scratch{}, nil)
		if i, ok := equalInts(heap, want); !ok {
			t.Fatalf("heap BPE of %q differs from naive at %d", p, i)
		}
		if len(p) <= heapThreshold {
			small := r.bpeSmall(nil, p, &scratch{})
			if i, ok := equalInts(small, want); !ok {
				t.Fatalf("array BPE of %q differs from naive at %d", p, i)
			}
		}
	}
}

// TestBPELongPieceLinear encodes a 1 MB piece with no split point and checks
// both the heap work (pushes and pops bounded by a small multiple of n,
// which a quadratic algorithm cannot meet) and, generously, the time.
func TestBPELongPieceLinear(t *testing.T) {
	fe := fixtureByName(t, "kimi-o200k")
	rng := rand.New(rand.NewSource(4))
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte('a' + rng.Intn(26))
	}
	piece := string(b)
	if got, _ := SplitKimi.Split(piece); len(got) != 1 {
		t.Fatalf("expected one piece, got %d", len(got))
	}
	var st bpeStats
	start := time.Now()
	ids := fe.enc.Ranks().bpeHeap(nil, piece, &scratch{}, &st)
	el := time.Since(start)
	n := len(piece)
	if st.pushes > 3*n || st.pops > 3*n || st.merges >= n {
		t.Errorf("heap work not linear: %d pushes, %d pops, %d merges for %d bytes", st.pushes, st.pops, st.merges, n)
	}
	if st.merges != n-len(ids) {
		t.Errorf("%d merges but %d bytes -> %d ids", st.merges, n, len(ids))
	}
	if el > 30*time.Second { // a backstop only: quadratic merging would take hours; the step counts above are the real check
		t.Errorf("1 MB piece took %v", el)
	}
	back, err := fe.enc.DecodeBytes(ids)
	if err != nil || string(back) != piece {
		t.Error("1 MB piece does not round-trip")
	}
	t.Logf("1 MiB piece: %d ids, %d pushes, %d pops, %d merges, %v", len(ids), st.pushes, st.pops, st.merges, el)
	// The same through Encode (single piece, whole pipeline).
	ids2, err := fe.enc.Encode(piece, NoSpecial)
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := equalInts(ids2, ids); !ok {
		t.Errorf("Encode differs from bpeHeap at %d", i)
	}
}
