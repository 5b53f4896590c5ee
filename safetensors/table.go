package safetensors

import (
	"sync"
	"sync/atomic"
)

// table is an open-addressing hash set of int32 ids keyed by precomputed
// 64-bit hashes. Hashes are computed by the goroutines that parse shards,
// so building the ~500k-name K3 index is a cheap serial pass; a Go map would
// rehash every name on the single merging goroutine. Each slot packs the
// high hash bits with the id so that a probe touches one cache line.
type table struct {
	slots []uint64 // hash>>32 <<32 | id+1; 0 = empty
	mask  uint64
}

func newTable(n int) *table {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	return &table{slots: make([]uint64, size), mask: uint64(size - 1)}
}

// insert adds id unless an id with an equal key is present, in which case it
// returns that id and false. eq reports whether a stored id has id's key.
func (t *table) insert(h uint64, id int32, eq func(int32) bool) (int32, bool) {
	tag := h &^ 0xffffffff
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			t.slots[i] = tag | uint64(uint32(id)+1)
			return id, true
		}
		if s&^0xffffffff == tag && eq(int32(uint32(s)-1)) {
			return int32(uint32(s) - 1), false
		}
	}
}

// find returns the id whose key satisfies eq, probing from hash h.
func (t *table) find(h uint64, eq func(int32) bool) (int32, bool) {
	if t == nil {
		return 0, false
	}
	tag := h &^ 0xffffffff
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if s&^0xffffffff == tag && eq(int32(uint32(s)-1)) {
			return int32(uint32(s) - 1), true
		}
	}
}

// insertShared is insert for concurrent use: slots are claimed with a
// compare-and-swap, and a goroutine that loses the race re-examines the slot,
// so two equal keys inserted at once are still detected. Lookups through eq
// must only read data written before the insert calls began.
func (t *table) insertShared(h uint64, id int32, eq func(int32) bool) (int32, bool) {
	tag := h &^ 0xffffffff
	v := tag | uint64(uint32(id)+1)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		p := &t.slots[i]
		s := atomic.LoadUint64(p)
		if s == 0 {
			if atomic.CompareAndSwapUint64(p, 0, v) {
				return id, true
			}
			s = atomic.LoadUint64(p)
		}
		if s&^0xffffffff == tag && eq(int32(uint32(s)-1)) {
			return int32(uint32(s) - 1), false
		}
	}
}

// parallel runs fn over [0, n) split into contiguous ranges on up to
// workers goroutines and reports whether every call returned true.
func parallel(n, workers int, fn func(lo, hi int) bool) bool {
	const grain = 16384
	w := min(workers, (n+grain-1)/grain)
	if w <= 1 {
		return fn(0, n)
	}
	var ok atomic.Bool
	ok.Store(true)
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		lo, hi := n*k/w, n*(k+1)/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !fn(lo, hi) {
				ok.Store(false)
			}
		}()
	}
	wg.Wait()
	return ok.Load()
}
