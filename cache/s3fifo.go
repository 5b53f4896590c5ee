package cache

// s3fifo is S3-FIFO exactly as §9.3: resident slots sit in SMALL or
// MAIN (FIFOs), evicted SMALL keys are remembered in GHOST, and a 2-bit
// frequency decides between promotion, a second chance and eviction.
type s3fifo struct {
	n, smallTarget int
	freq           []uint8
	key            []uint64
	where          []uint8 // inNone, inSmall, inMain
	small, main    ring
	ghost          ghost
}

const (
	inNone uint8 = iota
	inSmall
	inMain
)

// NewS3FIFO returns an S3-FIFO policy over nslots slots: smallTarget =
// max(1, ⌊0.1·nslots⌋), a ghost of nslots keys.
func NewS3FIFO(nslots int) Policy {
	return &s3fifo{
		n: nslots, smallTarget: max(1, nslots/10),
		freq: make([]uint8, nslots), key: make([]uint64, nslots), where: make([]uint8, nslots),
		small: newRing(nslots), main: newRing(nslots),
		ghost: ghost{capacity: nslots, live: make(map[uint64]uint64, nslots)},
	}
}

func (p *s3fifo) Name() PolicyName { return S3FIFO }

func (p *s3fifo) Hit(slot int) {
	if p.where[slot] != inNone && p.freq[slot] < 3 {
		p.freq[slot]++
	}
}

func (p *s3fifo) Insert(slot int, key uint64) {
	p.Remove(slot)
	p.key[slot], p.freq[slot] = key, 0
	if p.ghost.remove(key) {
		p.main.push(int32(slot))
		p.where[slot] = inMain
		return
	}
	p.small.push(int32(slot))
	p.where[slot] = inSmall
}

func (p *s3fifo) Victim(evictable func(int) bool) (int, error) {
	limit := 4*p.n + 8
	// rejSmall and rejMain count passed-over candidates per queue: once a
	// whole queue has been passed over, the other one is tried (with leases
	// SMALL can hold only in-use entries while MAIN has a victim). Without
	// leases nothing is passed over and this is §9.3's loop exactly.
	rejected, rejSmall, rejMain := 0, 0, 0
	for {
		useSmall := p.small.n >= p.smallTarget || p.main.n == 0
		switch {
		case useSmall && rejSmall >= p.small.n && p.main.n > 0 && rejMain < p.main.n:
			useSmall = false
		case !useSmall && rejMain >= p.main.n && p.small.n > 0 && rejSmall < p.small.n:
			useSmall = true
		}
		if useSmall {
			if p.small.n == 0 {
				return -1, ErrNoEvictableSlot
			}
			s := p.small.pop()
			switch {
			case p.freq[s] > 0:
				p.freq[s] = 0
				p.main.push(s)
				p.where[s] = inMain
			case !evictable(int(s)):
				p.small.push(s)
				rejSmall++
				if rejected++; rejected > limit {
					return -1, ErrNoEvictableSlot
				}
			default:
				p.where[s] = inNone
				p.ghost.push(p.key[s])
				return int(s), nil
			}
			continue
		}
		s := p.main.pop()
		switch {
		case p.freq[s] > 0:
			p.freq[s]--
			p.main.push(s)
		case !evictable(int(s)):
			p.main.push(s)
			rejMain++
			if rejected++; rejected > limit {
				return -1, ErrNoEvictableSlot
			}
		default:
			p.where[s] = inNone
			return int(s), nil
		}
	}
}

func (p *s3fifo) Remove(slot int) {
	switch p.where[slot] {
	case inSmall:
		p.small.remove(int32(slot))
	case inMain:
		p.main.remove(int32(slot))
	}
	p.where[slot], p.freq[slot] = inNone, 0
}

// ring is a FIFO of slots with a fixed capacity (a slot is queued at most
// once, so nslots always suffices).
type ring struct {
	buf     []int32
	head, n int
}

func newRing(capacity int) ring { return ring{buf: make([]int32, capacity)} }

func (r *ring) push(v int32) {
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

func (r *ring) pop() int32 {
	v := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v
}

// remove deletes v, keeping the order of the others (a failed fill: rare).
func (r *ring) remove(v int32) {
	for i := range r.n {
		if r.buf[(r.head+i)%len(r.buf)] != v {
			continue
		}
		for j := i; j < r.n-1; j++ {
			r.buf[(r.head+j)%len(r.buf)] = r.buf[(r.head+j+1)%len(r.buf)]
		}
		r.n--
		return
	}
}

// ghost is a FIFO of at most capacity keys with O(1) membership. Removed
// keys stay in the queue as stale entries (their sequence number no longer
// matches live) and are skipped when they reach the head.
type ghost struct {
	capacity int
	q        []ghostEntry
	head     int
	live     map[uint64]uint64 // key → sequence number of its queue entry
	seq      uint64
}

type ghostEntry struct{ key, seq uint64 }

func (g *ghost) push(key uint64) {
	if _, ok := g.live[key]; !ok && len(g.live) >= g.capacity {
		for g.head < len(g.q) {
			e := g.q[g.head]
			g.head++
			if s, ok := g.live[e.key]; ok && s == e.seq {
				delete(g.live, e.key)
				break
			}
		}
	}
	g.seq++
	g.live[key] = g.seq
	if (g.head > len(g.q)/2 && g.head > 64) || len(g.q)-g.head > 2*g.capacity+64 {
		g.compact()
	}
	g.q = append(g.q, ghostEntry{key, g.seq})
}

// compact drops the consumed head and the stale entries.
func (g *ghost) compact() {
	out := g.q[:0]
	for _, e := range g.q[g.head:] {
		if s, ok := g.live[e.key]; ok && s == e.seq {
			out = append(out, e)
		}
	}
	g.q, g.head = out, 0
}

func (g *ghost) remove(key uint64) bool {
	if _, ok := g.live[key]; !ok {
		return false
	}
	delete(g.live, key)
	return true
}
