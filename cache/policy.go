package cache

import (
	"errors"
	"fmt"
)

// ErrNoEvictableSlot reports that every slot was leased or being filled
// when a new expert needed one (§9.3): the budget is too small for the
// experts in use at once.
var ErrNoEvictableSlot = errors.New("cache: no evictable slot")

// PolicyName names a replacement policy (§9.3).
type PolicyName string

const (
	// LRU evicts the evictable slot used longest ago.
	LRU PolicyName = "lru"
	// S3FIFO is S3-FIFO (small and main FIFOs, a ghost FIFO of keys, 2-bit
	// frequencies), the default.
	S3FIFO PolicyName = "s3fifo"
)

// ErrUnknownPolicy reports a policy name other than "lru" and "s3fifo".
var ErrUnknownPolicy = errors.New("cache: unknown policy")

// ParsePolicy maps "lru" and "s3fifo" (or "s3-fifo") to a PolicyName.
func ParsePolicy(s string) (PolicyName, error) {
	switch s {
	case "lru":
		return LRU, nil
	case "s3fifo", "s3-fifo":
		return S3FIFO, nil
	}
	return "", fmt.Errorf("%w %q (want lru or s3fifo)", ErrUnknownPolicy, s)
}

// Policy decides which resident slot to give up when a new key needs one.
// It sees slots (0..n−1) and keys only; the owner (the Store or the
// simulator) keeps the key → slot map and the free slots, so the Store and
// cache/sim run the very same decisions. A Policy is not safe for
// concurrent use; the Store calls it under its lock.
//
// The owner calls, per request: Hit when the key is resident; otherwise it
// takes a free slot if it has one, or asks Victim for one (Victim forgets
// the slot it returns), then calls Insert. Remove forgets a slot whose fill
// failed.
type Policy interface {
	Name() PolicyName
	Hit(slot int)
	Insert(slot int, key uint64)
	// Victim removes and returns the slot to evict. evictable reports
	// whether a slot may go now (not leased, not being filled); a candidate
	// that may not is passed over.
	Victim(evictable func(slot int) bool) (int, error)
	Remove(slot int)
}

// NewPolicy returns the named policy over nslots slots (nslots ≥ 1).
func NewPolicy(name PolicyName, nslots int) (Policy, error) {
	if nslots < 1 {
		return nil, fmt.Errorf("cache: policy over %d slots", nslots)
	}
	switch name {
	case LRU:
		return NewLRU(nslots), nil
	case S3FIFO, "":
		return NewS3FIFO(nslots), nil
	}
	return nil, fmt.Errorf("%w %q (want lru or s3fifo)", ErrUnknownPolicy, string(name))
}

// Always is an evictable predicate that accepts every slot, for owners
// without leases such as the simulator.
func Always(int) bool { return true }
