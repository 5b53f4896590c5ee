package cache

// lruPolicy keeps the resident slots in a doubly linked list ordered by last
// use, most recent at the head; the victim is the evictable slot nearest the
// tail.
type lruPolicy struct {
	prev, next []int32
	in         []bool
	head, tail int32 // −1 when empty
}

// NewLRU returns an LRU policy over nslots slots.
func NewLRU(nslots int) Policy {
	p := &lruPolicy{prev: make([]int32, nslots), next: make([]int32, nslots), in: make([]bool, nslots), head: -1, tail: -1}
	return p
}

func (p *lruPolicy) Name() PolicyName { return LRU }

func (p *lruPolicy) unlink(s int32) {
	if pv := p.prev[s]; pv >= 0 {
		p.next[pv] = p.next[s]
	} else {
		p.head = p.next[s]
	}
	if nx := p.next[s]; nx >= 0 {
		p.prev[nx] = p.prev[s]
	} else {
		p.tail = p.prev[s]
	}
	p.in[s] = false
}

func (p *lruPolicy) pushFront(s int32) {
	p.prev[s], p.next[s] = -1, p.head
	if p.head >= 0 {
		p.prev[p.head] = s
	} else {
		p.tail = s
	}
	p.head = s
	p.in[s] = true
}

func (p *lruPolicy) Hit(slot int) {
	s := int32(slot)
	if !p.in[s] || p.head == s {
		return
	}
	p.unlink(s)
	p.pushFront(s)
}

func (p *lruPolicy) Insert(slot int, _ uint64) {
	s := int32(slot)
	if p.in[s] {
		p.unlink(s)
	}
	p.pushFront(s)
}

func (p *lruPolicy) Victim(evictable func(int) bool) (int, error) {
	for s := p.tail; s >= 0; s = p.prev[s] {
		if evictable(int(s)) {
			p.unlink(s)
			return int(s), nil
		}
	}
	return -1, ErrNoEvictableSlot
}

func (p *lruPolicy) Remove(slot int) {
	if p.in[slot] {
		p.unlink(int32(slot))
	}
}
