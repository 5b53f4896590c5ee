package moe

import (
	"slices"
	"testing"
)

// TestLargestFirst pins the expert split's claiming order: descending by the
// positions that picked each expert, ties in index order.
func TestLargestFirst(t *testing.T) {
	// sizes 3, 0, 5, 3, 1, 5
	start := []int{0, 3, 3, 8, 11, 12, 17}
	got := largestFirst(make([]int, 6), start)
	if want := []int{2, 5, 0, 3, 4, 1}; !slices.Equal(got, want) {
		t.Errorf("largestFirst = %v, want %v", got, want)
	}
	if got := largestFirst(nil, []int{0}); len(got) != 0 {
		t.Errorf("no experts: %v", got)
	}
	if one := largestFirst(make([]int, 1), []int{0, 4}); !slices.Equal(one, []int{0}) {
		t.Errorf("one expert: %v", one)
	}
	// Every permutation of the same sizes gives a descending order.
	sizes := []int{7, 1, 7, 2, 9, 0, 2}
	for range 20 {
		st := []int{0}
		for _, s := range sizes {
			st = append(st, st[len(st)-1]+s)
		}
		order := largestFirst(make([]int, len(sizes)), st)
		if !slices.IsSortedFunc(order, func(a, b int) int {
			if d := sizes[b] - sizes[a]; d != 0 {
				return d
			}
			return a - b
		}) {
			t.Fatalf("order %v for sizes %v", order, sizes)
		}
		sizes = append(sizes[1:], sizes[0])
	}
}
